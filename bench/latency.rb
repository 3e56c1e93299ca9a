#!/usr/bin/env ruby
# frozen_string_literal: true

# Latency: how long a critical job waits behind a busy default queue, and how late scheduled jobs
# start. The real Sidekiq 6.4.1 against queue, in the same run, on a redis-server of the benchmark's
# own.
#
#   ruby bench/latency.rb                       # CRITICAL=100 and SCHEDULED=100 jobs, ROUNDS=1
#   CRITICAL=50 SCHEDULED=50 ruby bench/latency.rb
#
# How each is measured: bench/lib/critical_wait_run.rb, bench/lib/scheduled_lateness_run.rb,
# bench/README.md. Sidekiq runs with its defaults (its scheduler polls every 2.5-7.5 s).
require_relative "lib/clients"
require_relative "lib/redis_server"
require_relative "lib/report"
require_relative "lib/critical_wait_run"
require_relative "lib/scheduled_lateness_run"

module Bench
  # Runs the rounds and prints and records the results.
  module Latency
    CRITICAL = Integer(ENV.fetch("CRITICAL", "100"))
    SCHEDULED = Integer(ENV.fetch("SCHEDULED", "100"))
    ROUNDS = Integer(ENV.fetch("ROUNDS", "1"))
    SEED = Integer(ENV.fetch("SEED", Random.new_seed.to_s))
    CONCURRENCY = 5
    KINDS = %i[sidekiq queue].freeze
    QUEUES = {"critical_strict" => %w[critical default], "critical_weighted" => %w[critical,3 default,1]}.freeze
    MEASUREMENTS = [*QUEUES.keys, "scheduled"].freeze
    FIELDS = %w[p50_ms p99_ms max_ms min_ms samples fillers_left first_poll_s].freeze
    LABELS = {"sidekiq" => "Sidekiq #{Sidekiq::VERSION}", "queue" => "queue #{JobQueue::VERSION}"}.freeze
    # Goals (reported, not asserted): queue's critical p99 within 10 ms of Sidekiq's (40 ms at the
    # least), and scheduled jobs at most 50 ms late (p99).
    CRITICAL_SLACK_MS = 10.0
    CRITICAL_FLOOR_MS = 40.0
    SCHEDULED_GOAL_MS = 50.0

    module_function

    def run
      redis = RedisServer.new.start
      Clients.configure(redis.url)
      rng = Random.new(SEED)
      load_before = Cpu.loadavg
      rounds = (1..ROUNDS).map { |i| round(redis, i, rng) }
      load_after = Cpu.loadavg
      summary = MEASUREMENTS.to_h do |m|
        [m, KINDS.to_h { |k| [k.to_s, Report.medians(rounds.map { |r| r.dig(m, k.to_s) }, FIELDS)] }]
      end
      print_report(summary, load_before, load_after)
      path = Report.write_json("latency", {
        "benchmark" => "latency", "critical_jobs" => CRITICAL, "scheduled_jobs" => SCHEDULED, "rounds" => ROUNDS,
        "concurrency" => CONCURRENCY, "seed" => SEED, "queues" => QUEUES,
        "machine" => Report.machine(redis.version).merge("loadavg_before" => load_before, "loadavg_after" => load_after),
        "runs" => rounds, "medians" => summary, "goals" => goals(summary)
      })
      puts "\nresults: #{path}"
    ensure
      redis&.stop
    end

    def round(redis, index, rng)
      order = index.odd? ? KINDS : KINDS.reverse
      MEASUREMENTS.to_h do |m|
        [m, order.to_h do |kind|
          warn "round #{index}/#{ROUNDS}: #{kind} #{m}..."
          [kind.to_s, measure(m, kind, redis, rng)]
        end]
      end
    end

    def measure(measurement, kind, redis, rng)
      if measurement == "scheduled"
        ScheduledLatenessRun.new(kind, redis, jobs: SCHEDULED, concurrency: CONCURRENCY, rng: rng).call
      else
        CriticalWaitRun.new(kind, redis, queues: QUEUES.fetch(measurement), jobs: CRITICAL, concurrency: CONCURRENCY, rng: rng).call
      end
    end

    # [description, met?] for each goal.
    def goals(summary)
      critical = QUEUES.map do |m, queues|
        ours, theirs = %w[queue sidekiq].map { |k| summary.dig(m, k, "p99_ms") }
        limit = [theirs + CRITICAL_SLACK_MS, CRITICAL_FLOOR_MS].max
        {"goal" => format("critical wait, -q %s: queue p99 %.1f ms ≤ max(Sidekiq p99 %.1f + %d, %d) = %.1f ms",
          queues.join(" -q "), ours, theirs, CRITICAL_SLACK_MS, CRITICAL_FLOOR_MS, limit), "met" => ours <= limit}
      end
      late = summary.dig("scheduled", "queue", "p99_ms")
      critical << {"goal" => format("scheduled lateness: queue p99 %.1f ms ≤ %d ms", late, SCHEDULED_GOAL_MS),
                   "met" => late <= SCHEDULED_GOAL_MS}
    end

    def print_report(summary, load_before, load_after)
      puts "\nLatency, median of #{ROUNDS} round(s), -c #{CONCURRENCY}, seed #{SEED}"
      puts Report.load_line(load_before, load_after)
      puts "\nCritical-job wait (start − push): `default` full of 20 ms jobs, #{CRITICAL} critical jobs pushed 30-70 ms apart"
      rows = QUEUES.flat_map { |m, queues| KINDS.map { |k| critical_row(queues, k, summary.dig(m, k.to_s)) } }
      puts Report.table(["", "p50 ms", "p99 ms", "max ms", "jobs", "fillers left"], rows)
      puts "\nScheduled lateness (start − due): #{SCHEDULED} jobs due 1-4 s after their push, pushed 40-120 ms apart, idle server"
      rows = KINDS.map { |k| scheduled_row(k, summary.dig("scheduled", k.to_s)) }
      puts Report.table(["", "p50 ms", "p99 ms", "max ms", "jobs", "first poll s"], rows)
      puts "(first poll: from the server's start until a job due at once had run; Sidekiq waits 10-15 s, then polls every 2.5-7.5 s)"
      puts "\nGoals (reported, not asserted):"
      goals(summary).each { |g| puts "  #{g["met"] ? "PASS" : "FAIL"}  #{g["goal"]}" }
    end

    def critical_row(queues, kind, m)
      ["-q #{queues.join(" -q ")}: #{LABELS.fetch(kind.to_s)}", *figures(m), Report.num(m["fillers_left"])]
    end

    def scheduled_row(kind, m)
      [LABELS.fetch(kind.to_s), *figures(m), Report.num(m["first_poll_s"], 1)]
    end

    def figures(m)
      [Report.num(m["p50_ms"], 1), Report.num(m["p99_ms"], 1), Report.num(m["max_ms"], 1), Report.num(m["samples"])]
    end
  end
end

Bench::Latency.run if $PROGRAM_NAME == __FILE__
