# frozen_string_literal: true

require_relative "support"
require_relative "../apps/batch_crash"

# Batches under crashes: a 20,000-job batch whose server is killed with SIGKILL twice mid-run and
# restarted. The engine counts each job in the script that acknowledges it and pushes the callback
# in the script that sees the last count, so the counts come out exact and `success` fires exactly
# once, after the last job ran, whatever the kills cut short.
RSpec.describe "a batch across two kill -9" do
  include_context "with server processes"

  let(:jobs) { 20_000 }
  let(:redis_url) { TestRedis.url }

  def start_batch_server = start_server("batch_crash.rb", "-c", "10", env: {"REDIS_URL" => redis_url})

  it "fires success exactly once, after the last job, with exact counts" do
    started = monotonic
    batch = JobQueue::Batch.new
    batch.on(:complete, BatchCrashCallback)
    batch.on(:success, BatchCrashCallback)
    batch.jobs { BatchCountWorker.perform_bulk((1..jobs).map { |id| [id] }) }
    expect(JobQueue::Batch::Status.new(batch.bid).total).to eq(jobs)

    server = start_batch_server
    kills = [6_000, 12_000].map do |mark|
      wait_until("#{mark} jobs to have run", timeout: 60) { redis.hlen("runs") >= mark }
      identity_of(server)
      server.kill!
      orphaned = held_jobs
      server = start_batch_server
      orphaned
    end

    wait_until("the success callback", timeout: 60) { redis.llen("success") == 1 }
    wait_until("nothing held or queued", timeout: 30) { outstanding_jobs.zero? }
    server.stop
    elapsed = monotonic - started

    success = redis.lrange("success", 0, -1).map { |raw| JSON.parse(raw) }
    runs = redis.hvals("runs").map(&:to_i)
    status = JobQueue::Batch::Status.new(batch.bid)
    report(format("batch crash test: %d jobs, 2 kill -9 (%s jobs held at each), %d reruns, %.1f s",
      jobs, kills.join("/"), runs.sum - runs.size, elapsed))

    expect(kills).to all(be > 0) # each kill hit a busy server
    expect(success).to eq([{"ran" => jobs, "pending" => 0, "total" => jobs, "failures" => 0}])
    expect(redis.lrange("complete", 0, -1)).to eq(["0"])
    expect(runs.size).to eq(jobs)
    expect([status.total, status.pending, status.failures, status.dead]).to eq([jobs, 0, 0, 0])
    expect(status.callbacks_done).to eq(%w[complete success])
  end
end
