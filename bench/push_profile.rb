#!/usr/bin/env ruby
# frozen_string_literal: true

# Where a push's time goes, from 1 thread and from 16: per push, the client's CPU, Redis's CPU, the
# reads Redis made to take the commands in (one per write that reached it apart from others: 1 per
# push without combining, 1/batch with it) and its writes of replies, and the pushing threads'
# context switches (voluntary: slept on a futex or the socket; involuntary: preempted). A profile,
# not a benchmark: no target, one round, to be run under `perf stat`/`strace -c -f` if wanted.
#
#   ruby bench/push_profile.rb                      # queue's client, THREADS=1,16, M=20000
#   KIND=sidekiq ruby bench/push_profile.rb         # Sidekiq 6.4.1's, a pool of as many connections
require_relative "lib/clients"
require_relative "lib/redis_server"
require_relative "lib/report"

module Bench
  # One profile run per thread count.
  module PushProfile
    KIND = ENV.fetch("KIND", "queue").to_sym
    THREADS = ENV.fetch("THREADS", "1,16").split(",").map { |t| Integer(t) }
    M = Integer(ENV.fetch("M", "20000"))

    module_function

    def run
      redis = RedisServer.new.start
      Clients.configure(redis.url)
      Clients.pool(redis.url, THREADS.max)
      klass = KIND == :queue ? QueueBlankJob : SidekiqBlankJob
      rows = THREADS.map { |threads| [threads, measure(redis, klass, threads, 1000), measure(redis, klass, threads, M)].then { |t, _, m| [t, m] } }
      header = ["threads", "jobs/s", "client CPU µs", "Redis CPU µs", "Redis reads", "Redis writes", "ctx sw (vol)", "ctx sw (invol)"]
      puts "#{KIND} #{KIND == :queue ? JobQueue::VERSION : Sidekiq::VERSION}, #{M} pushes, per push:"
      puts Report.table(header, rows.map { |t, m| [t.to_s, Report.num(m[:rate]), *m.values_at(:client, :redis, :reads, :writes, :vol, :invol).map { |x| format("%.3f", x) }] })
    ensure
      redis&.stop
    end

    def measure(redis, klass, threads, jobs)
      redis.client.flushall
      GC.start
      before = counters(redis)
      switches = push(klass, threads, jobs)
      after = counters(redis)
      found = redis.client.llen("queue:default")
      raise "expected #{jobs} jobs, found #{found}" unless found == jobs

      per = ->(k) { (after[k] - before[k]) / jobs.to_f }
      {rate: jobs / (after[:at] - before[:at]), client: per.(:client) * 1e6, redis: per.(:redis) * 1e6,
       reads: per.(:reads), writes: per.(:writes), vol: switches[0] / jobs.to_f, invol: switches[1] / jobs.to_f}
    end

    # Pushes from `threads` threads started together; the context switches their threads made.
    def push(klass, threads, jobs)
      gate = Queue.new
      workers = Array.new(threads) do |i|
        share = jobs / threads + (i < jobs % threads ? 1 : 0)
        Thread.new do
          gate.pop
          first = switches
          share.times { klass.perform_async }
          switches.zip(first).map { |a, b| a - b }
        end
      end
      threads.times { gate << true }
      workers.map(&:value).transpose.map(&:sum)
    end

    def switches
      status = File.read("/proc/thread-self/status")
      %w[voluntary_ctxt_switches nonvoluntary_ctxt_switches].map { |f| status[/^#{f}:\s+(\d+)/, 1].to_i }
    end

    def counters(redis)
      stats = redis.client.info("stats")
      {at: Process.clock_gettime(Process::CLOCK_MONOTONIC), client: Cpu.self_seconds, redis: redis.cpu_seconds,
       reads: stats.fetch("total_reads_processed").to_i, writes: stats.fetch("total_writes_processed").to_i}
    end
  end
end

Bench::PushProfile.run if $PROGRAM_NAME == __FILE__
