#!/usr/bin/env ruby
# frozen_string_literal: true

# Processing throughput of blank jobs: the real Sidekiq 6.4.1 against queue, in the same run, on a
# redis-server of the benchmark's own.
#
#   ruby bench/throughput.rb            # N=300000 jobs, ROUNDS=5, -c 10
#   N=20000 ROUNDS=2 ruby bench/throughput.rb
#
# Each round drains N jobs once with each server (the order alternates between rounds) and the table
# shows the medians. How the time and CPU are measured: bench/lib/throughput_run.rb, bench/README.md.
require_relative "lib/drain_rounds"
require_relative "lib/log_cost"
require_relative "lib/throughput_run"

module Bench
  # Runs the rounds and prints and records the results.
  module Throughput
    JOBS = Integer(ENV.fetch("N", "300000"))
    ROUNDS = Integer(ENV.fetch("ROUNDS", "5"))
    CONCURRENCY = 10
    # queue and queue_nosk stay next to each other whichever way a round runs them.
    # ONLY=sk_metrics runs just that pair (more rounds in the same time, for the metrics' cost).
    SK_METRICS_ONLY = ENV["ONLY"] == "sk_metrics"
    KINDS = (SK_METRICS_ONLY ? %w[queue queue_nosk] : %w[sidekiq queue queue_nosk queue_logs]).freeze
    LABELS = {"sidekiq" => "Sidekiq #{Sidekiq::VERSION}", "queue" => "queue #{JobQueue::VERSION}",
      "queue_nosk" => "queue, Sidekiq metrics off", "queue_logs" => "queue, job lines on"}.freeze
    # What the project aims for (reported, not asserted): issue #27's blank-job goals (jobs/s judged
    # on the median of the rounds' paired ratios; server CPU on the median of the queue drains), and
    # the fetch issue's Redis CPU.
    TARGET_SPEEDUP = 10.0
    TARGET_SERVER_US = 5.0
    TARGET_REDIS_US = 4.0
    # Per-job log lines (INFO) may cost this much of the throughput without them (judged on the
    # median of the rounds' paired costs: bench/lib/log_cost.rb).
    TARGET_LOG_COST = 0.05
    # Writing Sidekiq's Metrics page data (`sidekiq_metrics = 7`, the default, which every queue
    # drain but queue_nosk runs with) may cost this much of the throughput without it (issue #25).
    TARGET_SK_METRICS_COST = 0.03

    module_function

    def run
      rounds, summary, machine = DrainRounds.run(ROUNDS, KINDS) { |redis, index| round(redis, index) }
      print_report(rounds, summary, machine)
      path = Report.write_json("throughput", {
        "benchmark" => "throughput",
        "jobs" => JOBS, "rounds" => ROUNDS, "concurrency" => CONCURRENCY, "machine" => machine,
        "runs" => rounds, "medians" => summary, "ratios" => (ratios(summary) unless SK_METRICS_ONLY),
        "paired_speedup" => (paired_speedup(rounds) unless SK_METRICS_ONLY),
        "targets" => {"speedup" => TARGET_SPEEDUP, "server_cpu_us_per_job" => TARGET_SERVER_US, "redis_cpu_us_per_job" => TARGET_REDIS_US},
        "job_lines_cost" => (LogCost.new(rounds, summary).to_h unless SK_METRICS_ONLY),
        "sidekiq_metrics_cost" => sk_metrics_cost(rounds, summary).to_h
      })
      puts "\nresults: #{path}"
    end

    def round(redis, index)
      order = index.odd? ? KINDS : KINDS.reverse
      order.to_h do |kind|
        warn "round #{index}/#{ROUNDS}: #{kind} draining #{JOBS} jobs..."
        [kind, ThroughputRun.new(kind.to_sym, redis, jobs: JOBS, concurrency: CONCURRENCY).call]
      end
    end

    def print_sk_metrics_report(rounds, summary)
      puts Report.table(Report::DRAIN_HEADER, KINDS.map { |k| Report.drain_row(LABELS.fetch(k), summary.fetch(k)) })
      sk_cost = sk_metrics_cost(rounds, summary)
      puts sk_cost.report_lines
      puts "\nEach round:"
      puts Report.rounds_table(rounds, KINDS)
      puts "\nTarget (reported, not asserted):"
      puts Report.target("Sidekiq metrics cost ≤ #{(TARGET_SK_METRICS_COST * 100).round}% of jobs/s", sk_cost.paired <= TARGET_SK_METRICS_COST,
        format("%.1f%% (median of the rounds' paired costs)", sk_cost.paired * 100))
    end

    def sk_metrics_cost(rounds, summary) = LogCost.new(rounds, summary, on: "queue", off: "queue_nosk", what: "Sidekiq metrics")

    def ratios(summary) = Report.drain_ratios(summary.fetch("queue"), summary.fetch("sidekiq"))

    # The median over the rounds of queue's jobs/s over Sidekiq's in the same round.
    def paired_speedup(rounds)
      Report.median(rounds.map { |rd| Report.ratio(rd.dig("queue", "jobs_per_s"), rd.dig("sidekiq", "jobs_per_s")) })
    end

    def print_report(rounds, summary, machine)
      puts "\nThroughput: #{Report.num(JOBS)} blank jobs, -c #{CONCURRENCY}, median of #{ROUNDS} round(s)"
      puts Report.load_line(machine["loadavg_before"], machine["loadavg_after"])
      puts
      return print_sk_metrics_report(rounds, summary) if SK_METRICS_ONLY

      rows = KINDS.map { |k| Report.drain_row(LABELS.fetch(k), summary.fetch(k)) }
      r = ratios(summary)
      rows << Report.drain_ratio_row("queue / Sidekiq", r)
      puts Report.table(Report::DRAIN_HEADER, rows)
      puts "(ratios of CPU per job: lower is better for queue)"
      by_round = rounds.map { |rd| Report.times(Report.ratio(rd.dig("queue", "jobs_per_s"), rd.dig("sidekiq", "jobs_per_s"))) }
      puts "queue / Sidekiq jobs/s in each round: #{by_round.join(", ")}"
      log_cost = LogCost.new(rounds, summary)
      puts log_cost.report_lines
      sk_cost = sk_metrics_cost(rounds, summary)
      puts sk_cost.report_lines
      puts "\nEach round:"
      puts Report.rounds_table(rounds, KINDS)
      puts "\nTargets (reported, not asserted):"
      paired = paired_speedup(rounds)
      puts Report.target("processing jobs/s ≥ #{TARGET_SPEEDUP.round}× Sidekiq", paired >= TARGET_SPEEDUP,
        "#{Report.times(paired)} (median of the rounds' paired ratios; of the medians: #{Report.times(r["jobs_per_s"])})")
      server_us = summary.dig("queue", "server_cpu_us_per_job")
      puts Report.target("server CPU ≤ #{TARGET_SERVER_US.round} µs/job", server_us <= TARGET_SERVER_US,
        "#{Report.num(server_us, 2)} µs (Sidekiq: #{Report.num(summary.dig("sidekiq", "server_cpu_us_per_job"), 1)} µs)")
      redis_us = summary.dig("queue", "redis_cpu_us_per_job")
      puts Report.target("Redis CPU ≤ #{TARGET_REDIS_US} µs/job", redis_us <= TARGET_REDIS_US, "#{Report.num(redis_us, 1)} µs")
      cost = log_cost.paired
      puts Report.target("per-job log lines cost ≤ #{(TARGET_LOG_COST * 100).round}% of jobs/s", cost <= TARGET_LOG_COST,
        format("%.1f%% (median of the rounds' paired costs)", cost * 100))
      puts Report.target("Sidekiq metrics cost ≤ #{(TARGET_SK_METRICS_COST * 100).round}% of jobs/s", sk_cost.paired <= TARGET_SK_METRICS_COST,
        format("%.1f%% (median of the rounds' paired costs)", sk_cost.paired * 100))
    end
  end
end

Bench::Throughput.run if $PROGRAM_NAME == __FILE__
