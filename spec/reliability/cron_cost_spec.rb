# frozen_string_literal: true

require_relative "support"
require_relative "../apps/reliability_clock"

# What cron schedules cost Redis while nothing is due: with 1,000 schedules stored, the scheduler
# leader reads them once (its index), and then a second of its turns makes no per-schedule command,
# only the once-a-second change check (`SCARD cron_jobs` and a `GET`).
RSpec.describe "cron schedules at rest" do
  include_context "with server processes"

  # Calls per command, scripts' inner calls counted as calls of their own.
  def calls
    redis.info("commandstats").transform_values { |stats| stats["calls"].to_i }
  end

  it "costs no per-schedule command a second with 1,000 schedules and none due" do
    schedules = Array.new(1000) { |i| {"name" => "yearly_#{i}", "class" => "ReliabilityClockWorker", "cron" => "0 0 1 1 *"} }
    JobQueue::Cron.load_from_array(schedules)
    expect(redis.scard("cron_jobs")).to eq(1000)

    server = start_server("reliability_clock.rb", "-c", "2")
    identity = identity_of(server)
    wait_until("the server to take the scheduler lease") { redis.get("jq:scheduler:leader") == identity }
    # The leader's first turn reads every schedule's cron string once.
    wait_until("the leader to read the 1,000 schedules") { calls.fetch("hget", 0) >= 1000 }

    before = calls
    started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    window = 3.0
    wait_until("a #{window} s window", timeout: window + 5) { Process.clock_gettime(Process::CLOCK_MONOTONIC) - started >= window }
    after = calls
    delta = ->(command) { after.fetch(command, 0) - before.fetch(command, 0) }

    # Per-schedule reads (the index's HGET, a due tick's HMGET) and per-schedule scripts: none.
    # (SMEMBERS and ZADD are not counted: the heartbeat and liveness beat use them too.)
    expect(%w[hget hmget hgetall].to_h { |c| [c, delta.call(c)] }).to eq("hget" => 0, "hmget" => 0, "hgetall" => 0)
    expect(redis.zcard("cron_job:yearly_0:enqueued")).to eq(1) # the save's own claim, nothing pushed
    expect(delta.call("scard")).to be_between(2, 5)
    expect(redis.llen("queue:default")).to eq(0)
  end
end
