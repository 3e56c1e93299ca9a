#!/usr/bin/env ruby
# frozen_string_literal: true

# Ordered jobs (issue #6) against the real Sidekiq 6.4.1's plain jobs, in the same run, on a
# redis-server of the benchmark's own: N blank ordered jobs (distinct ids, 5 shards) drained by
# `exe/queue -c 5` at batch size 1 and at batch size 10, and N blank plain jobs drained by
# `sidekiq -c 5`.
#
#   ruby bench/ordered.rb               # N=100000 jobs, ROUNDS=3
#   N=20000 ROUNDS=1 ruby bench/ordered.rb
#
# Each round drains N jobs once with each (the order rotates between rounds); the table shows the
# medians. How time and CPU are measured: bench/lib/throughput_run.rb, bench/lib/ordered_run.rb,
# bench/README.md.
require_relative "lib/drain_rounds"
require_relative "lib/throughput_run"
require_relative "lib/ordered_run"

module Bench
  # Runs the rounds and prints and records the results.
  module Ordered
    JOBS = Integer(ENV.fetch("N", "100000"))
    ROUNDS = Integer(ENV.fetch("ROUNDS", "3"))
    CONCURRENCY = 5
    KINDS = %w[sidekiq ordered_1 ordered_10].freeze
    LABELS = {
      "sidekiq" => "Sidekiq #{Sidekiq::VERSION} plain",
      "ordered_1" => "queue ordered, batch 1",
      "ordered_10" => "queue ordered, batch 10"
    }.freeze
    # Issue #6's targets (reported, not asserted).
    TARGET_SPEEDUP = 2.0
    FLOOR_SPEEDUP = 1.0
    TARGET_REDIS_US = 15.0

    module_function

    def run
      rounds, summary, machine = DrainRounds.run(ROUNDS, KINDS) { |redis, index| round(redis, index) }
      print_report(rounds, summary, machine)
      path = Report.write_json("ordered", {
        "benchmark" => "ordered",
        "jobs" => JOBS, "rounds" => ROUNDS, "concurrency" => CONCURRENCY, "shards" => OrderedBlankJob.shards_count,
        "machine" => machine, "runs" => rounds, "medians" => summary,
        "ratios" => KINDS.drop(1).to_h { |k| [k, ratios(summary, k)] }
      })
      puts "\nresults: #{path}"
    end

    def round(redis, index)
      order = KINDS.rotate(index - 1)
      order.to_h do |kind|
        warn "round #{index}/#{ROUNDS}: #{kind} draining #{JOBS} jobs..."
        [kind, measure(kind, redis).call]
      end
    end

    def measure(kind, redis)
      return ThroughputRun.new(:sidekiq, redis, jobs: JOBS, concurrency: CONCURRENCY) if kind == "sidekiq"

      OrderedRun.new(redis, jobs: JOBS, concurrency: CONCURRENCY, batch: Integer(kind.delete_prefix("ordered_")))
    end

    def ratios(summary, kind) = Report.drain_ratios(summary.fetch(kind), summary.fetch("sidekiq"))

    def print_report(rounds, summary, machine)
      puts "\nOrdered: #{Report.num(JOBS)} blank jobs, -c #{CONCURRENCY}, #{OrderedBlankJob.shards_count} shards, " \
        "distinct ids, median of #{ROUNDS} round(s)"
      puts Report.load_line(machine["loadavg_before"], machine["loadavg_after"])
      puts
      rows = KINDS.map { |k| Report.drain_row(LABELS.fetch(k), summary.fetch(k)) }
      KINDS.drop(1).each { |k| rows << Report.drain_ratio_row("#{k} / Sidekiq", ratios(summary, k)) }
      puts Report.table(Report::DRAIN_HEADER, rows)
      by_round = rounds.map { |rd| Report.times(Report.ratio(rd.dig("ordered_1", "jobs_per_s"), rd.dig("sidekiq", "jobs_per_s"))) }
      puts "ordered batch 1 / Sidekiq jobs/s in each round: #{by_round.join(", ")}"
      puts "\nEach round:"
      puts Report.rounds_table(rounds, KINDS)
      print_targets(summary)
    end

    def print_targets(summary)
      speedup = ratios(summary, "ordered_1")["jobs_per_s"]
      puts "\nTargets (issue #6; reported, not asserted):"
      puts Report.target("ordered batch-1 jobs/s ≥ #{TARGET_SPEEDUP}× Sidekiq's plain jobs/s", speedup >= TARGET_SPEEDUP, Report.times(speedup))
      puts Report.target("ordered batch-1 jobs/s ≥ #{FLOOR_SPEEDUP}× Sidekiq's (the floor)", speedup >= FLOOR_SPEEDUP, Report.times(speedup))
      KINDS.drop(1).each do |k|
        us = summary.dig(k, "redis_cpu_us_per_job")
        puts Report.target("Redis CPU ≤ #{TARGET_REDIS_US} µs per ordered job (#{LABELS.fetch(k)})", us <= TARGET_REDIS_US, "#{Report.num(us, 1)} µs")
      end
    end
  end
end

Bench::Ordered.run if $PROGRAM_NAME == __FILE__
