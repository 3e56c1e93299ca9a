#!/usr/bin/env ruby
# frozen_string_literal: true

# The cost of deduplication: the same blank job pushed and processed with it (`idempotent!`, so
# `until_executing`) and without, in the same run, on a redis-server of the benchmark's own. Every
# job has its own argument, so every push takes a key and every run releases one (the worst case:
# nothing is dropped).
#
#   ruby bench/dedup.rb              # M=20000 jobs, ROUNDS=5, server -c 10
#
# Enqueue: M jobs one by one (`perform_async`) from this thread. Bare: the same M pushes' requests,
# written beforehand and sent one by one by a client that does nothing else (BareClient): plain
# LPUSH + SADD, and the engine's one-job dedup script. Its slowdown is the script's own cost, the least
# any client pays for taking the key and pushing in one atomic step; it is shown, not judged.
# Processing: M jobs pushed in bulk beforehand, timed from the server's registration until it has run
# them all.
#
# Each round runs both modes of each phase one right after the other (their order alternating), so a
# round in which the whole machine is slower moves both alike: the target is judged on the median of
# the rounds' paired slowdowns; the slowdown computed from the two modes' medians is shown beside it.
require_relative "lib/clients"
require_relative "lib/redis_server"
require_relative "lib/report"
require_relative "lib/server"
require_relative "lib/cpu"
require_relative "lib/bare_client"
require "digest"

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
    SCRIPT = File.read(File.expand_path("../ext/queue_core/src/scripts/dedup_push_one.lua", __dir__))
    PHASES = %w[enqueue bare process].freeze

    module_function

    def run
      redis = RedisServer.new.start
      Clients.configure(redis.url)
      enqueue(redis, :off, 1000)
      bare_client = BareClient.new(redis)
      sha = bare_client.call(BareClient.command("SCRIPT", "LOAD", SCRIPT), 2).lines.last.chomp
      rounds = (1..ROUNDS).map do |i|
        order = i.odd? ? %w[off on] : %w[on off]
        order.to_h do |mode|
          [mode, {"enqueue" => enqueue(redis, mode, JOBS), "bare" => bare(redis, mode, bare_client, sha),
                  "process" => process(redis, mode)}]
        end
      end
      report(rounds)
    ensure
      bare_client&.close
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

    # The enqueue phase's pushes, sent by `client` from requests written beforehand: what Redis alone
    # makes them cost.
    def bare(redis, mode, client, sha)
      redis.client.flushall
      requests = Array.new(JOBS) { |n| bare_request(mode, n, sha) }
      r0 = redis.cpu_seconds
      us = client.time(requests, 2)
      redis_us = (redis.cpu_seconds - r0) * 1e6 / JOBS
      found = redis.client.llen("queue:default")
      raise "bare #{mode}: #{found} of #{JOBS} jobs queued" unless found == JOBS

      {"jobs_per_s" => 1e6 / us, "redis_cpu_us" => redis_us}
    end

    # A push as the engine writes it: the job's JSON, and for dedup the script with the keys and
    # arguments the engine passes it (dedup_push_one.lua's header), the key as WIRE.md §2 makes it.
    def bare_request(mode, n, sha)
      now = Time.now.to_f
      job = {"retry" => true, "queue" => "default", "class" => CLASSES.fetch(mode).name, "args" => [n],
             "jid" => SecureRandom.hex(12), "created_at" => now, "enqueued_at" => now}
      if mode == "off"
        return BareClient.command("LPUSH", "queue:default", JSON.generate(job)) + BareClient.command("SADD", "queues", "default")
      end

      key = "duplicate:default:#{Digest::SHA256.hexdigest("#{job["class"]}:#{JSON.generate(job["args"])}")}"
      BareClient.command("EVALSHA", sha, 5, "queues", "queue:default", key, "jq:features", "jq:metrics",
        "default", job["jid"], JobQueue::Worker::Deduplication::DEFAULT_TTL, JSON.generate(job.merge("idempotency_key" => key)),
        "1", "disable_default_deduplication", "d:7:default:#{job["class"]}")
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
      PHASES.each do |phase|
        off = med.("off", phase, "jobs_per_s")
        on = med.("on", phase, "jobs_per_s")
        paired = rounds.map { |r| 1 - r.dig("on", phase, "jobs_per_s") / r.dig("off", phase, "jobs_per_s") }
        slower = Report.median(paired)
        sides = {"enqueue" => {"client" => "client_cpu_us"}, "process" => {"server" => "server_cpu_us"}}.fetch(phase, {})
        extra = sides.merge("Redis" => "redis_cpu_us").map do |side, field|
          "#{side} CPU µs/job off #{Report.num(med.("off", phase, field), 1)}, on #{Report.num(med.("on", phase, field), 1)}"
        end
        verdict = if phase == "bare"
          "not judged: the script's own cost, with no client work"
        else
          slower <= TARGET_SLOWDOWN ? "met (≤ 15% slower)" : "MISSED (> 15% slower)"
        end
        puts format("  %-8s %+.1f%%  %s   (median of the rounds' paired slowdowns)", phase, -slower * 100, verdict)
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
