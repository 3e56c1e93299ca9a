#!/usr/bin/env ruby
# frozen_string_literal: true

# The cost of deduplication: the same blank job pushed and processed with it (`idempotent!`, so
# `until_executing`) and without, in the same run, on a redis-server of the benchmark's own. Every
# job has its own argument, so every push takes a key and every run releases one (the worst case:
# nothing is dropped).
#
#   ruby bench/dedup.rb              # M=20000 jobs, ROUNDS=5, server -c 10
#
# Enqueue: M jobs one by one (`perform_async`) from this thread. Processing: M jobs pushed in bulk
# beforehand, timed from the server's registration until it has run them all. Each round runs both
# modes one right after the other (their order alternating), so a round in which the whole machine is
# slower moves both alike: the target is judged on the median of the rounds' paired slowdowns; the
# slowdown computed from the two modes' medians is shown beside it.
require_relative "lib/clients"
require_relative "lib/redis_server"
require_relative "lib/report"
require_relative "lib/server"
require_relative "lib/cpu"

# The job classes as bench/apps/dedup_app.rb defines them for the server; here they are only pushed.
class QueuePlainJob
  include JobQueue::Worker
end

class QueueDedupJob
  include JobQueue::Worker
  idempotent!
end

module Bench
  module Dedup
    JOBS = Integer(ENV.fetch("M", "20000"))
    ROUNDS = Integer(ENV.fetch("ROUNDS", "5"))
    CONCURRENCY = 10
    TARGET_SLOWDOWN = 0.15
    CLASSES = {"off" => QueuePlainJob, "on" => QueueDedupJob}.freeze

    module_function

    def run
      redis = RedisServer.new.start
      Clients.configure(redis.url)
      enqueue(redis, :off, 1000)
      rounds = (1..ROUNDS).map do |i|
        order = i.odd? ? %w[off on] : %w[on off]
        order.to_h { |mode| [mode, {"enqueue" => enqueue(redis, mode, JOBS), "process" => process(redis, mode)}] }
      end
      report(rounds)
    ensure
      redis&.stop
    end

    def enqueue(redis, mode, jobs)
      redis.client.flushall
      klass = CLASSES.fetch(mode.to_s)
      GC.start
      t0 = monotonic
      c0 = Cpu.self_seconds
      r0 = redis.cpu_seconds
      jobs.times { |n| klass.perform_async(n) }
      seconds = monotonic - t0
      redis_us = (redis.cpu_seconds - r0) * 1e6 / jobs
      found = redis.client.llen("queue:default")
      raise "enqueue #{mode}: #{found} of #{jobs} jobs queued" unless found == jobs

      {"jobs_per_s" => jobs / seconds, "client_cpu_us" => (Cpu.self_seconds - c0) * 1e6 / jobs, "redis_cpu_us" => redis_us}
    end

    # The jobs are pushed first (untimed); the server is timed from its registration until it has
    # run them all, so the comparison is of the server side alone.
    def process(redis, mode)
      redis.client.flushall
      klass = CLASSES.fetch(mode)
      JOBS.times.each_slice(1000) { |slice| klass.perform_bulk(slice.map { |n| [n] }) }
      done = File.join(redis.dir, "done-#{mode}-#{monotonic}")
      server = Server.new(:queue, redis, app: "dedup_app.rb", args: ["-c", CONCURRENCY.to_s],
        env: {"BENCH_N" => JOBS.to_s, "BENCH_DONE" => done}).start
      server.wait_for("registration", interval: 0.002, timeout: 60) { redis.client.scard("processes") == 1 }
      t0 = monotonic
      r0 = redis.cpu_seconds
      s0 = Cpu.process_seconds(server.pid)
      server.wait_for("#{JOBS} jobs", interval: 0.005) { File.exist?(done) }
      seconds = monotonic - t0
      {"jobs_per_s" => JOBS / seconds, "redis_cpu_us" => (redis.cpu_seconds - r0) * 1e6 / JOBS,
       "server_cpu_us" => (Cpu.process_seconds(server.pid) - s0) * 1e6 / JOBS,
       "keys_left" => redis.client.keys("duplicate:*").size}
    ensure
      server&.stop
    end

    def report(rounds)
      med = ->(mode, phase, field) { Report.median(rounds.map { |r| r.dig(mode, phase, field) }) }
      puts "\nDeduplication: #{Report.num(JOBS)} blank jobs, distinct args, #{ROUNDS} round(s)"
      %w[enqueue process].each do |phase|
        off = med.("off", phase, "jobs_per_s")
        on = med.("on", phase, "jobs_per_s")
        paired = rounds.map { |r| 1 - r.dig("on", phase, "jobs_per_s") / r.dig("off", phase, "jobs_per_s") }
        slower = Report.median(paired)
        sides = phase == "enqueue" ? {"client" => "client_cpu_us"} : {"server" => "server_cpu_us"}
        extra = sides.merge("Redis" => "redis_cpu_us").map do |side, field|
          "#{side} CPU µs/job off #{Report.num(med.("off", phase, field), 1)}, on #{Report.num(med.("on", phase, field), 1)}"
        end
        puts format("  %-8s %+.1f%%  %s   (median of the rounds' paired slowdowns)", phase, -slower * 100,
          slower <= TARGET_SLOWDOWN ? "met (≤ 15% slower)" : "MISSED (> 15% slower)")
        puts "           each round: #{paired.map { |x| format("%+.1f%%", -x * 100) }.join(", ")}"
        puts format("           medians: off %s jobs/s, on %s jobs/s (%+.1f%%); %s", Report.num(off), Report.num(on), (on / off - 1) * 100, extra.join("; "))
      end
      left = rounds.map { |r| r.dig("on", "process", "keys_left") }
      puts "  idempotency keys left after processing (0 expected): #{left.join(", ")}"
    end

    def monotonic
      Process.clock_gettime(Process::CLOCK_MONOTONIC)
    end
  end
end

Bench::Dedup.run if $PROGRAM_NAME == __FILE__
