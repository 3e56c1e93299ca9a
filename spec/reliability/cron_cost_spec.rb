# frozen_string_literal: true

require_relative "support"
require_relative "../apps/reliability_clock"

# What cron schedules cost Redis on an idle server (issue #23, acceptance 6): with 1,000 schedules
# stored, the scheduler leader reads them once (its index), and then a second of its turns makes no
# per-schedule command, only the once-a-second change check (`SCARD cron_jobs` and a `GET`); a
# schedule that comes due costs one `HMGET` and one script call per tick: O(due), not O(schedules).
RSpec.describe "cron schedules at rest" do
  include_context "with server processes"

  WINDOW = 3.0

  # Calls per command, scripts' inner calls counted as calls of their own.
  def calls
    redis.info("commandstats").transform_values { |stats| stats["calls"].to_i }
  end

  def yearly(count) = Array.new(count) { |i| {"name" => "yearly_#{i}", "class" => "ReliabilityClockWorker", "cron" => "0 0 1 1 *"} }

  # Starts a server, waits for its leader to read the schedules, and counts the commands of a window.
  # Returns each command's calls in the window and the window's length.
  def idle_window(schedules: 1000, before_window: -> {})
    server = start_server("reliability_clock.rb", "-c", "2")
    identity = identity_of(server)
    wait_until("the server to take the scheduler lease") { redis.get("jq:scheduler:leader") == identity }
    # The leader's first turn reads every schedule's cron string (and catch_up) once.
    wait_until("the leader to read the #{schedules} schedules") { calls.fetch("hmget", 0) >= schedules }
    before_window.call
    before = calls
    started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    wait_until("a #{WINDOW} s window", timeout: WINDOW + 5) { Process.clock_gettime(Process::CLOCK_MONOTONIC) - started >= WINDOW }
    after = calls
    seconds = Process.clock_gettime(Process::CLOCK_MONOTONIC) - started
    [after.to_h { |command, n| [command, n - before.fetch(command, 0)] }.reject { |_, n| n.zero? }, seconds]
  end

  it "costs no per-schedule command a second with 1,000 schedules and none due" do
    # The same server with no schedule first: the scheduler's own polls, the heartbeat, the fetch.
    empty, empty_seconds = idle_window(schedules: 0)
    servers.pop.stop
    JobQueue::Cron.load_from_array(yearly(1000))
    expect(redis.scard("cron_jobs")).to eq(1000)

    delta, seconds = idle_window
    total = delta.values.sum
    baseline = empty.values.sum / empty_seconds
    warn format("idle server, no schedule: %.1f Redis commands a second; 1,000 schedules, none due: %.1f (%s)",
      baseline, total / seconds, delta.sort_by { |_, n| -n }.map { |c, n| "#{c} #{n}" }.join(", "))

    # Per-schedule reads (the index's HMGET, a due tick's HMGET) and per-schedule scripts: none.
    # (SMEMBERS and ZADD are not counted: the heartbeat and liveness beat use them too.)
    expect(%w[hget hmget hgetall].to_h { |c| [c, delta.fetch(c, 0)] }).to eq("hget" => 0, "hmget" => 0, "hgetall" => 0)
    expect(redis.zcard("cron_job:yearly_0:enqueued")).to eq(1) # the save's own claim, nothing pushed
    expect(delta.fetch("scard", 0)).to be_between(2, 5)
    # The whole server: what it sends with no schedule, plus the change check (~2 a second).
    expect(total / seconds - baseline).to be < 10
    expect(redis.llen("queue:default")).to eq(0)
  end

  it "costs one read and one script call per due tick with 1,000 schedules, one due every second" do
    JobQueue::Cron.load_from_array(yearly(999) + [{"name" => "every_second", "class" => "ReliabilityClockWorker", "cron" => "* * * * * *"}])
    pushes = -> { redis.llen("cron_job:every_second:jid_history") }
    first = nil
    delta, seconds = idle_window(before_window: -> { wait_until("the first tick") { (first = pushes.call) >= 1 } })
    ticks = pushes.call - first
    warn format("cron, 1,000 schedules, one due a second: %d ticks in %.1f s; hmget %d, evalsha %d, %.1f commands a second",
      ticks, seconds, delta.fetch("hmget", 0), delta.fetch("evalsha", 0), delta.values.sum / seconds)

    expect(ticks).to be_between(WINDOW.floor - 1, WINDOW.ceil + 1)
    # One HMGET per tick (a tick at the window's edge may fall on either side of the count).
    expect(delta.fetch("hmget", 0)).to be_between(ticks - 1, ticks + 1)
    # The script's own HGET of status, one per tick; no HGETALL.
    expect(delta.fetch("hget", 0)).to be_between(ticks - 1, ticks + 1)
    expect(delta.fetch("hgetall", 0)).to eq(0)
    # The whole idle server's rate (its scheduler polls 40 times a second) is far below one command
    # per schedule a second.
    expect(delta.values.sum / seconds).to be < 400
  end
end
