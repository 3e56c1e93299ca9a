# frozen_string_literal: true

require "queue/api"
require_relative "../apps/batches"
require_relative "../compat/shim_helper"

# Batches (Sidekiq Pro's API) against a real Redis and a real server: each callback kind, the
# status fields, reopening, nesting three levels deep, invalidation and expiry.
RSpec.describe JobQueue::Batch do
  let(:redis) { TestRedis.client }

  def callbacks = redis.lrange("callbacks", 0, -1)
  def ran = redis.lrange("ran", 0, -1)

  def serve = start_server(app: "batches.rb", args: ["-c", "4", "-q", "batch", "-q", "default"])

  def new_batch(description)
    batch = described_class.new
    batch.description = description
    batch.on(:complete, BatchCallbacks, "k" => "v")
    batch.on(:success, BatchCallbacks)
    batch.on(:death, BatchCallbacks)
    batch
  end

  it "counts every push inside jobs (one by one, bulk, scheduled) and fires complete, then success, once" do
    batch = new_batch("plain")
    batch.jobs do
      BatchJob.perform_async("a")
      BatchJob.perform_bulk([["b"], ["c"]])
      JobQueue::Client.push_bulk("class" => BatchJob, "args" => [["d"]])
      BatchJob.perform_in(0.2, "e")
    end
    expect(redis.lrange("queue:batch", 0, -1).map { |j| JSON.parse(j)["bid"] }.uniq).to eq([batch.bid])
    status = JobQueue::Batch::Status.new(batch.bid)
    expect([status.total, status.pending, status.failures, status.complete?]).to eq([5, 5, 0, false])
    expect(status.description).to eq("plain")
    expect(status.created_at).to be_within(5).of(Time.now)

    serve
    wait_until("both callbacks") { callbacks.size == 2 }
    expect(callbacks).to eq(["complete:plain:k=v", "success:plain:0"])
    expect(ran.sort).to eq(%w[a b c d e])
    status = JobQueue::Batch::Status.new(batch.bid).join(timeout: 5)
    expect([status.total, status.pending, status.failures, status.dead]).to eq([5, 0, 0, 0])
    expect([status.complete?, status.success?]).to eq([true, true])
    expect(status.callbacks_fired.keys).to eq(%w[complete success])
    expect(status.callbacks_done).to eq(%w[complete success])
    expect(JobQueue::BatchSet.new.map(&:bid)).to eq([batch.bid])
  end

  it "fires complete once every job has run once, and success after the failed job succeeds" do
    batch = new_batch("retried")
    batch.jobs do
      BatchJob.perform_async("ok1")
      BatchJob.perform_async("flaky", "fail_once")
    end
    serve
    wait_until("complete") { callbacks == ["complete:retried:k=v"] }
    status = JobQueue::Batch::Status.new(batch.bid)
    expect([status.pending, status.failures, status.complete?, status.success?]).to eq([1, 1, true, false])
    expect(status.failure_info.map { |f| [f.error_class, f.error_message] }).to eq([["RuntimeError", "first attempt of flaky"]])

    JobQueue::RetrySet.new.retry_all # the retry, now
    wait_until("success") { callbacks.size == 2 }
    expect(callbacks).to eq(["complete:retried:k=v", "success:retried:0"])
    status = JobQueue::Batch::Status.new(batch.bid)
    expect([status.pending, status.failures, status.success?]).to eq([0, 0, true])
  end

  it "fires death the first time a job dies, complete when the rest ran, and never success" do
    batch = new_batch("dying")
    batch.jobs do
      DyingJob.perform_async("x")
      DyingJob.perform_async("y")
      BatchJob.perform_async("z")
    end
    serve
    wait_until("death and complete") { callbacks.size == 2 && ran == ["z"] }
    status = JobQueue::Batch::Status.new(batch.bid)
    expect([status.pending, status.failures, status.dead, status.complete?, status.success?]).to eq([2, 2, 2, true, false])
    expect(callbacks.sort).to eq(["complete:dying:k=v", "death:dying:#{callbacks.find { |c| c.start_with?("death") }[-1]}"])
    expect(callbacks.count { |c| c.start_with?("death") }).to eq(1)
  end

  it "lets a job add jobs to its own batch (reopening); success waits for them" do
    batch = new_batch("reopened")
    batch.jobs { ReopeningJob.perform_async("r") }
    serve
    wait_until("success") { callbacks.size == 2 }
    expect(ran.sort).to eq(%w[r r-a r-b])
    status = JobQueue::Batch::Status.new(batch.bid)
    expect([status.total, status.pending]).to eq([3, 0])
  end

  it "nests three levels: a parent's callbacks wait for its children's, in order" do
    top = described_class.new
    top.description = "level1"
    top.on(:complete, BatchCallbacks, "level" => 1)
    top.on(:success, "BatchCallbacks#done", "level" => 1)
    top.jobs { NestingJob.perform_async(1) }
    serve
    wait_until("six callbacks") { callbacks.size == 6 }
    order = callbacks.map { |c| c.split(":").first(2).join(":") }
    at = ->(name) { order.index(name) }
    expect(order.sort).to eq(%w[complete:level1 complete:level2 complete:level3 success:level1 success:level2 success:level3])
    expect(at["complete:level3"]).to be < at["complete:level2"]
    expect(at["complete:level2"]).to be < at["complete:level1"]
    expect(at["success:level3"]).to be < at["success:level2"]
    expect(at["success:level2"]).to be < at["success:level1"]
    (1..3).each { |l| expect(at["complete:level#{l}"]).to be < at["success:level#{l}"] }
    kids = JobQueue::BatchSet.new.map { |s| [s.description, s.parent_bid] }.to_h
    expect(kids["level1"]).to be_nil
    expect(JobQueue::Batch::Status.new(top.bid).kids).to eq(1)
  end

  it "fires complete and success at once for an empty jobs block" do
    batch = new_batch("empty")
    batch.jobs {}
    serve
    wait_until("both callbacks") { callbacks.size == 2 }
    expect(callbacks).to eq(["complete:empty:k=v", "success:empty:0"])
    expect(JobQueue::Batch::Status.new(batch.bid).total).to eq(0)
  end

  it "skips the jobs of an invalidated batch and fires nothing" do
    batch = new_batch("cancelled")
    batch.jobs { 3.times { |i| BatchJob.perform_async("i#{i}") } }
    expect(batch.valid?).to be(true)
    expect(batch.invalidate_all).to be(true)
    expect(batch.valid?).to be(false)
    serve
    wait_until("the jobs to be taken and acknowledged") { redis.llen("queue:batch").zero? && JobQueue::Batch::Status.new(batch.bid).pending.zero? }
    expect(ran).to eq([])
    expect(callbacks).to eq([])
    expect(JobQueue::Batch::Status.new(batch.bid).invalidated?).to be(true)
  end

  it "expires a finished batch's data after its expires_in, and the listing forgets it" do
    batch = new_batch("short")
    batch.expires_in = 2
    batch.jobs { BatchJob.perform_async("s") }
    serve
    wait_until("success") { callbacks.size == 2 }
    expect(redis.ttl("jq:batch:#{batch.bid}")).to be_between(1, 2)
    wait_until("the data to expire") { !JobQueue::Batch::Status.new(batch.bid).exists? }
    expect(JobQueue::BatchSet.new.to_a).to eq([])
    expect(JobQueue::BatchSet.new.size).to eq(0)
  end

  it "takes ActiveJob jobs pushed inside jobs (our adapter) into the batch", :shim do
    bid = run_ruby(<<~RUBY, requires: [app_path("batches_active_job.rb")]).strip
      batch = JobQueue::Batch.new
      batch.description = "active job"
      batch.on(:success, BatchCallbacks)
      batch.jobs { BatchActiveJob.perform_later("aj1"); BatchActiveJob.perform_later("aj2") }
      puts batch.bid
    RUBY
    expect(JobQueue::Batch::Status.new(bid).total).to eq(2)
    start_server(app: "batches_active_job.rb", args: ["-c", "2", "-q", "batch", "-q", "default"])
    wait_until("success") { callbacks == ["success:active job:0"] }
    expect(ran.sort).to eq(%w[aj1 aj2])
  end

  it "refuses what cannot be a batch where it is written" do
    expect { described_class.new.on(:finished, BatchCallbacks) }.to raise_error(ArgumentError, /unknown batch event :?"?finished/)
    expect { described_class.new.on(:success, Class.new) }.to raise_error(ArgumentError, /named class/)
    expect { described_class.new("nope") }.to raise_error(JobQueue::Batch::Error, /no batch "nope"/)
    expect { JobQueue.config.batch_expiry = 0 }.to raise_error(ArgumentError, /batch_expiry/)
  end
end
