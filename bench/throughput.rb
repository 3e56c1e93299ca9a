#!/usr/bin/env ruby
# frozen_string_literal: true

# Processing throughput of blank jobs: the real Sidekiq 6.4.1 against queue, in the same run, on a
# redis-server of the benchmark's own.
#
#   ruby bench/throughput.rb            # N=100000 jobs, ROUNDS=3, -c 10
#   N=20000 ROUNDS=2 ruby bench/throughput.rb
#
# Each round drains N jobs once with each server (the order alternates between rounds) and the table
# shows the medians. How the time and CPU are measured: bench/lib/throughput_run.rb, bench/README.md.
require_relative "lib/clients"
require_relative "lib/redis_server"
require_relative "lib/report"
require_relative "lib/throughput_run"

module Bench
  # Runs the rounds and prints and records the results.
  module Throughput
    JOBS = Integer(ENV.fetch("N", "100000"))
    ROUNDS = Integer(ENV.fetch("ROUNDS", "3"))
    CONCURRENCY = 10
    KINDS = %i[sidekiq queue queue_logs].freeze
    FIELDS = %w[jobs_per_s server_cpu_us_per_job redis_cpu_us_per_job seconds boot_seconds
      server_cores redis_cores other_processes_cores].freeze
    LABELS = {"sidekiq" => "Sidekiq #{Sidekiq::VERSION}", "queue" => "queue #{JobQueue::VERSION}",
      "queue_logs" => "queue, job lines on"}.freeze
    # What the project aims for (reported, not asserted): the fetch issue's goals.
    TARGET_SPEEDUP = 6.0
    TARGET_REDIS_US = 4.0
    # Per-job log lines (INFO) may cost this much of the throughput without them.
    TARGET_LOG_COST = 0.05

    module_function

    def run
      redis = RedisServer.new.start
      Clients.configure(redis.url)
      load_before = Cpu.loadavg
      rounds = (1..ROUNDS).map { |i| round(redis, i) }
      load_after = Cpu.loadavg
      summary = KINDS.to_h { |k| [k.to_s, Report.medians(rounds.map { |r| r[k.to_s] }, FIELDS)] }
      print_report(rounds, summary, load_before, load_after)
      path = Report.write_json("throughput", {
        "benchmark" => "throughput",
        "jobs" => JOBS, "rounds" => ROUNDS, "concurrency" => CONCURRENCY,
        "machine" => Report.machine(redis.version).merge("loadavg_before" => load_before, "loadavg_after" => load_after),
        "runs" => rounds, "medians" => summary, "ratios" => ratios(summary)
      })
      puts "\nresults: #{path}"
    ensure
      redis&.stop
    end

    def round(redis, index)
      order = index.odd? ? KINDS : KINDS.reverse
      order.to_h do |kind|
        warn "round #{index}/#{ROUNDS}: #{kind} draining #{JOBS} jobs..."
        [kind.to_s, ThroughputRun.new(kind, redis, jobs: JOBS, concurrency: CONCURRENCY).call]
      end
    end

    def ratios(summary)
      q, s = summary.fetch("queue"), summary.fetch("sidekiq")
      FIELDS.first(3).to_h { |f| [f, Report.ratio(q[f], s[f])] }
    end

    def print_report(rounds, summary, load_before, load_after)
      puts "\nThroughput: #{Report.num(JOBS)} blank jobs, -c #{CONCURRENCY}, median of #{ROUNDS} round(s)"
      puts Report.load_line(load_before, load_after)
      puts
      header = ["", "jobs/s", "server CPU µs/job", "Redis CPU µs/job", "drain s", "boot s", "other procs (cores)"]
      rows = KINDS.map { |k| Report.drain_row(LABELS.fetch(k.to_s), summary.fetch(k.to_s)) }
      r = ratios(summary)
      rows << ["queue / Sidekiq", Report.times(r["jobs_per_s"]), Report.times(r["server_cpu_us_per_job"]),
        Report.times(r["redis_cpu_us_per_job"]), "", "", ""]
      puts Report.table(header, rows)
      puts "(ratios of CPU per job: lower is better for queue)"
      by_round = rounds.map { |rd| Report.times(Report.ratio(rd.dig("queue", "jobs_per_s"), rd.dig("sidekiq", "jobs_per_s"))) }
      puts "queue / Sidekiq jobs/s in each round: #{by_round.join(", ")}"
      puts "\nEach round:"
      puts Report.table(header, rounds.each_with_index.flat_map { |rd, i| KINDS.map { |k| Report.drain_row("#{i + 1}: #{k}", rd.fetch(k.to_s)) } })
      puts "\nTargets (reported, not asserted):"
      puts Report.target("processing jobs/s ≥ #{TARGET_SPEEDUP}× Sidekiq", r["jobs_per_s"] >= TARGET_SPEEDUP, Report.times(r["jobs_per_s"]))
      redis_us = summary.dig("queue", "redis_cpu_us_per_job")
      puts Report.target("Redis CPU ≤ #{TARGET_REDIS_US} µs/job", redis_us <= TARGET_REDIS_US, "#{Report.num(redis_us, 1)} µs")
      cost = 1 - summary.dig("queue_logs", "jobs_per_s") / summary.dig("queue", "jobs_per_s")
      puts Report.target("per-job log lines cost ≤ #{(TARGET_LOG_COST * 100).round}% of jobs/s", cost <= TARGET_LOG_COST, format("%.1f%%", cost * 100))
    end
  end
end

Bench::Throughput.run if $PROGRAM_NAME == __FILE__
