# frozen_string_literal: true

require "queue/api"
require_relative "../apps/api_dedup"

# JobQueue::IdempotencyKeys: the deduplication keys held now, found by bounded SCAN steps, with the jid
# holding each and its TTL; released by hand. Over keys the real engine took: queued jobs, and a job a
# real server is running (until_executed holds its key until it finishes).
RSpec.describe "JobQueue::IdempotencyKeys" do
  let(:redis) { TestRedis.client }

  def key_for(worker, args, queue: "default")
    "duplicate:#{queue}:#{Digest::SHA256.hexdigest("#{worker.name}:#{JSON.generate(args)}")}"
  end

  it "walks the keys held, each with the jid holding it, its queue and its TTL" do
    jids = (1..30).to_h { |i| [key_for(DedupExecutingWorker, [i]), DedupExecutingWorker.perform_async(i)] }
    50.times { |i| redis.set("noise:#{i}", i) }
    keys = JobQueue::IdempotencyKeys.new
    step = keys.scan(0, count: 10)
    expect(step.size).to be <= 20
    expect(step.last?).to be(false)

    all = keys.to_a
    expect(all.to_h { |k| [k.key, k.jid] }).to eq(jids)
    expect(all.map(&:queue).uniq).to eq(["default"])
    expect(all.map(&:ttl)).to all(be_between(6 * 3600 - 10, 6 * 3600))
    expect(all.first.expires_at).to be_within(15).of(Time.now + 6 * 3600)
    expect(all.first.to_h.keys).to eq(%w[key queue jid ttl])
    expect(JobQueue::IdempotencyKeys.new(queue: "other").to_a).to eq([])
    expect(JobQueue::IdempotencyKeys.new(queue: "default").count).to eq(30)

    redis.persist(all.first.key)
    expect(keys.find { |k| k.key == all.first.key }.ttl).to be_nil
  end

  it "shows the key a running until_executed job holds, and releasing it lets a duplicate in" do
    jid = DedupExecutedWorker.perform_async("gated-1")
    server = start_server(app: "api_dedup.rb", args: ["-c", "1"])
    wait_until("the job to start") { recorded("dedup:started").any? }
    expect(redis.llen("queue:default")).to eq(0)
    held = JobQueue::IdempotencyKeys.new.to_a
    expect(held.map { |k| [k.key, k.jid] }).to eq([[key_for(DedupExecutedWorker, ["gated-1"]), jid]])
    expect(DedupExecutedWorker.perform_async("gated-1")).to be_nil # dropped while held

    stale = JobQueue::IdempotencyKey.new(held.first.key, "default", "not-the-holder", 1.0)
    expect(stale.delete).to be(false)
    expect(held.first.delete).to be(true)
    expect(JobQueue::IdempotencyKeys.new.to_a).to eq([])
    expect(DedupExecutedWorker.perform_async("gated-1")).to be_a(String)
    redis.rpush("dedup:gate:gated-1", "go")
    redis.rpush("dedup:gate:gated-1", "go")
    wait_until("both runs") { recorded("dedup:started").size == 2 }
    expect(server.stop.exitstatus).to eq(0)
  end

  it "says what it takes" do
    keys = JobQueue::IdempotencyKeys.new
    expect { keys.scan(0, count: 0) }.to raise_error(ArgumentError, /count must be an Integer from 1 to 1000, got 0/)
    expect { keys.scan(-1) }.to raise_error(ArgumentError, /cursor must be a non-negative Integer/)
    expect { JobQueue::IdempotencyKeys.release("queue:default") }.to raise_error(ArgumentError, /"queue:default" is not an idempotency key/)
  end
end
