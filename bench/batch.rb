# frozen_string_literal: true

# What a batch costs (issue #26), against the same work without one, in the same run:
#
# 1. Overhead per job: N blank jobs drained by one server at -c 10, once as plain jobs and once as
#    one batch with a success callback, in paired rounds (order alternating); the paired cost is
#    1 − (batched jobs/s) / (plain jobs/s) per round, judged on the median (goal ≤ 10%). Server and
#    Redis CPU per job are shown beside it. The batched drain ends when the success callback ran.
# 2. Callback latency: BATCHES batches of SIZE jobs pushed while a server runs; per batch, the time
#    from its last job's end (the latest end any of its jobs recorded) to its success callback's
#    start (goal p99 ≤ 100 ms).
#
#   ruby bench/batch.rb          N=300000 ROUNDS=15 BATCHES=200 SIZE=10 by default
#
# Fifteen rounds (about three minutes): on the 2-core VM single rounds swing by ±15%, and medians of
# five rounds of one build read anywhere from +1% to +21% in the same hour.
$LOAD_PATH.unshift(File.expand_path("../lib", __dir__))
require_relative "lib/clients"
require_relative "lib/cpu"
require_relative "lib/redis_server"
require_relative "lib/report"
require_relative "lib/server"

module Bench
  class BatchBench
    N = Integer(ENV.fetch("N", "300000"))
    ROUNDS = Integer(ENV.fetch("ROUNDS", "15"))
    BATCHES = Integer(ENV.fetch("BATCHES", "200"))
    SIZE = Integer(ENV.fetch("SIZE", "10"))
    CONCURRENCY = 10

    def run
      @redis = RedisServer.new.start
      Clients.configure(@redis.url)
      rounds = (1..ROUNDS).map do |i|
        kinds = i.odd? ? %i[plain batched] : %i[batched plain]
        kinds.to_h { |kind| [kind, drain(kind)] }
      end
      latencies = latency
      report(rounds, latencies)
    ensure
      @redis&.stop
    end

    private

    def drain(kind)
      @redis.client.flushall
      done = File.join(@redis.dir, "done")
      success = File.join(@redis.dir, "success")
      [done, success].each { |f| File.delete(f) if File.exist?(f) }
      push = -> { N.times.each_slice(1000) { |s| JobQueue::Client.push_bulk("class" => QUEUE_CLASS, "args" => Array.new(s.size) { [] }) } }
      if kind == :batched
        batch = JobQueue::Batch.new
        batch.on(:success, "BatchBenchDone")
        batch.jobs(&push)
      else
        push.call
      end
      server = Server.new(:queue, @redis, app: "batch_app.rb", args: ["-c", CONCURRENCY.to_s],
        env: {"BENCH_N" => N.to_s, "BENCH_DONE" => done, "BENCH_SUCCESS" => success})
      server.start
      begin
        server.wait_for("the first job", interval: 0.001) { @redis.client.llen("queue:default") < N }
        first = snapshot(server)
        server.wait_for("every job", interval: 0.002) do
          File.exist?(done) && @redis.client.get("stat:processed").to_i >= N && (kind == :plain || File.exist?(success))
        end
        last = snapshot(server)
      ensure
        server.stop
      end
      seconds = last[:at] - first[:at]
      {"jobs_per_s" => N / seconds, "server_cpu_us_per_job" => (last[:server] - first[:server]) * 1e6 / N,
       "redis_cpu_us_per_job" => (last[:redis] - first[:redis]) * 1e6 / N}
    end

    def snapshot(server)
      {at: Process.clock_gettime(Process::CLOCK_MONOTONIC), server: Cpu.process_seconds(server.pid), redis: @redis.cpu_seconds}
    end

    def latency
      @redis.client.flushall
      server = Server.new(:queue, @redis, app: "batch_app.rb", args: ["-c", CONCURRENCY.to_s],
        env: {"BENCH_N" => "1", "BENCH_DONE" => File.join(@redis.dir, "unused"), "BENCH_SUCCESS" => File.join(@redis.dir, "unused")})
      server.start
      begin
        # The goal is a running server's: its boot (classes loading, threads starting) is not timed.
        server.wait_for("the server's heartbeat", interval: 0.01) { @redis.client.scard("processes").positive? }
        bids = Array.new(BATCHES) do
          batch = JobQueue::Batch.new
          batch.on(:success, "LatencyCallback")
          batch.jobs { JobQueue::Client.push_bulk("class" => "LatencyJob", "args" => Array.new(SIZE) { [] }) }
          sleep 0.005 # spread the batches out, as an app's would be
          batch.bid
        end
        server.wait_for("every success callback", interval: 0.01) { @redis.client.hlen("callback_started") == BATCHES }
      ensure
        server.stop
      end
      started = @redis.client.hgetall("callback_started")
      bids.map do |bid|
        ended = @redis.client.hvals("ended:#{bid}").map(&:to_f).max
        pushed = @redis.client.hget("jq:batch:#{bid}", "success_at").to_f
        [started.fetch(bid).to_f - ended, pushed - ended]
      end
    end

    def report(rounds, latencies)
      costs = rounds.map { |r| 1 - r[:batched]["jobs_per_s"] / r[:plain]["jobs_per_s"] }
      cpu = rounds.map { |r| r[:batched]["server_cpu_us_per_job"] - r[:plain]["server_cpu_us_per_job"] }
      redis = rounds.map { |r| r[:batched]["redis_cpu_us_per_job"] - r[:plain]["redis_cpu_us_per_job"] }
      rounds.each_with_index do |r, i|
        puts format("round %d: plain %.0f jobs/s (server %.1f, redis %.1f µs/job); batched %.0f jobs/s (server %.1f, redis %.1f µs/job)",
          i + 1, r[:plain]["jobs_per_s"], r[:plain]["server_cpu_us_per_job"], r[:plain]["redis_cpu_us_per_job"],
          r[:batched]["jobs_per_s"], r[:batched]["server_cpu_us_per_job"], r[:batched]["redis_cpu_us_per_job"])
      end
      median = Report.median(costs)
      puts format("batch overhead (%d blank jobs, -c %d, %d paired rounds): %s; median %+.1f%% (goal ≤ 10%%: %s)",
        N, CONCURRENCY, ROUNDS, costs.map { |c| format("%+.1f%%", c * 100) }.join(", "), median * 100, median <= 0.10 ? "met" : "NOT met")
      puts format("  server CPU %+.1f µs/job, Redis CPU %+.1f µs/job (medians of the paired differences)", Report.median(cpu), Report.median(redis))
      ms = latencies.map { |total, _| total * 1000 }
      to_push = latencies.map { |_, pushed| pushed * 1000 }
      p99 = Report.percentile(ms, 99)
      puts format("last job's end → success callback's start (%d batches of %d): p50 %.1f ms, p99 %.1f ms, max %.1f ms (goal p99 ≤ 100 ms: %s)",
        BATCHES, SIZE, Report.percentile(ms, 50), p99, ms.max, p99 <= 100 ? "met" : "NOT met")
      puts format("  of which last job's end → callback pushed: p50 %.1f ms, p99 %.1f ms (the rest is the callback job's wait in its queue)",
        Report.percentile(to_push, 50), Report.percentile(to_push, 99))
      puts "load average now: #{Cpu.loadavg.map { |l| format("%.2f", l) }.join(" ")}"
      path = Report.write_json("batch", {
        "benchmark" => "batch", "jobs" => N, "rounds" => ROUNDS, "concurrency" => CONCURRENCY,
        "loadavg" => Cpu.loadavg, "runs" => rounds,
        "overhead" => {"per_round" => costs, "median" => median, "goal" => 0.10, "met" => median <= 0.10},
        "server_cpu_us_per_job" => Report.median(cpu), "redis_cpu_us_per_job" => Report.median(redis),
        "callback_latency_ms" => {"batches" => BATCHES, "size" => SIZE, "p50" => Report.percentile(ms, 50), "p99" => p99,
                                  "max" => ms.max, "to_push_p50" => Report.percentile(to_push, 50),
                                  "to_push_p99" => Report.percentile(to_push, 99), "goal_p99" => 100, "met" => p99 <= 100}
      })
      puts "results: #{path}"
    end
  end
end

Bench::BatchBench.new.run if $PROGRAM_NAME == __FILE__
