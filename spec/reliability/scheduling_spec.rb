# frozen_string_literal: true

require_relative "support"
require_relative "../apps/reliability_clock"

# Scheduled jobs start on time, and an idle leader's punctuality is cheap for Redis. One server
# process, nothing else running: what is measured is the scheduler, the hand-over to an idle thread
# and the start of the job.
RSpec.describe "punctual scheduling" do
  include_context "with server processes"

  # The window over which the idle rate is measured: long enough to include a Sidekiq heartbeat (5 s)
  # and two liveness beats (3 s).
  let(:idle_window) { 6.0 }

  # A server that holds the scheduler lease, with all its threads parked waiting for work.
  def start_idle_leader(threads: 5)
    server = start_server("reliability_clock.rb", "-c", threads.to_s)
    identity = identity_of(server)
    wait_until("the server to take the scheduler lease") { redis.get("jq:scheduler:leader") == identity }
    wait_until("the server's threads to park") { redis.client(:list).any? { |c| c["flags"].include?("b") && c["cmd"] == "blmove" } }
    server
  end

  # Nearest-rank percentile of sorted values.
  def percentile(sorted, pct)
    sorted[((pct / 100.0) * sorted.size).ceil - 1]
  end

  # Per command: [calls, microseconds spent], scripts' inner calls counted as calls of their own.
  def command_stats
    redis.info("commandstats").transform_values { |stats| [stats["calls"].to_i, stats["usec"].to_i] }
  end

  def ms(seconds)
    (seconds * 1000).round(1)
  end

  it "starts 100 jobs scheduled 1-4 s ahead less than 150 ms after their time (p99)" do
    start_idle_leader
    rng = Random.new(RSpec.configuration.seed)
    jids = Array.new(100) do |i|
      delay = 1 + (rng.rand * 3)
      if i.even?
        ReliabilityClockWorker.perform_in(delay, i)
      else
        ReliabilityClockWorker.perform_at(Time.now + delay, i)
      end
    end
    # The scores as the client wrote them. All 100 are still there, so none had been moved yet.
    due_at = redis.zrange("schedule", 0, -1, with_scores: true).to_h { |raw, score| [JSON.parse(raw)["jid"], score] }
    expect(due_at.keys).to match_array(jids)

    started = wait_until("all 100 jobs to start", timeout: 30) do
      times = redis.hgetall("started_at")
      times if times.size == jids.size
    end
    late = jids.map { |jid| Float(started[jid]) - due_at[jid] }.sort
    report(format("scheduling: 100 jobs scheduled 1-4 s ahead started late by p50 %.1f ms, p99 %.1f ms, max %.1f ms",
      ms(percentile(late, 50)), ms(percentile(late, 99)), ms(late.last)))

    expect(late.first).to be >= 0, "a job started #{ms(-late.first)} ms before its time"
    expect(percentile(late, 99)).to be < 0.150
  end

  it "costs Redis at most 50 scheduler calls a second while the leader is idle" do
    # The leader's polls are counted by their ZRANGEs: with nothing due, due.lua reads the head of
    # `schedule` and of `retry` (one ZRANGE each) on every poll it leads, and nothing else a plain
    # server runs calls ZRANGE. Ordered queues (ordered/, ordered_*.lua) do, but this server has none;
    # so do the inspection API (api/, its filter.lua) and moving a queue between shards (shard_take_set.lua,
    # `queue migrate --to`), which only operators' calls run, and a rate-limited worker's check
    # (limit_acquire.lua), which runs only as such a job starts.
    sources = Dir[File.join(ServerProcess::ROOT, "{ext/queue_core/src,ext/queue/src,lib}/**/*.{lua,rs,rb}")]
      .reject { |f| f.match?(%r{/(ordered|api)/}) || File.basename(f).start_with?("ordered_") || %w[filter.lua shard_take_set.lua limit_acquire.lua].include?(File.basename(f)) }
    expect(sources.select { |f| File.read(f).match?(/["']ZRANGE["']/i) }.map { |f| File.basename(f) }).to eq(["due.lua"])

    start_idle_leader
    before = command_stats
    from = monotonic
    sleep idle_window # a rate over time: there is no event to wait for
    after = command_stats
    seconds = monotonic - from

    delta = after.to_h { |cmd, (calls, _)| [cmd, calls - before.fetch(cmd, [0]).first] }
    delta.delete("info") # this spec's own measuring
    delta.reject! { |_, calls| calls.zero? }
    script_ms = (after.fetch("evalsha", [0, 0]).last - before.fetch("evalsha", [0, 0]).last) / 1000.0
    polls = delta.fetch("zrange", 0) / 2.0
    # An idle poll is EVALSHA running GET, SET and two ZRANGEs.
    scheduler_commands = polls * 5
    rate = ->(n) { n / seconds }
    report(format("idle server over %.1f s: scheduler %.1f calls/s (one EVALSHA per poll), %.1f commands/s counting " \
                  "those its script runs; whole server %.1f commands/s counted the same way (scheduler %.0f%%); " \
                  "Redis time in scripts %.2f ms/s; calls: %p",
      seconds, rate.(polls), rate.(scheduler_commands), rate.(delta.values.sum),
      100.0 * scheduler_commands / delta.values.sum, rate.(script_ms), delta))

    expect(delta.fetch("evalsha", 0)).to be >= polls
    expect(rate.(polls)).to be <= 50
    expect(rate.(polls)).to be >= 1 # the server leads: its polls were counted
  end
end
