#!/usr/bin/env ruby
# frozen_string_literal: true

# What concurrency and rate limits cost in blank-job throughput when they do not bind (issue #23,
# acceptance 6): our server draining N blank jobs with no limits ("none"), with limits configured on
# another worker only ("other"), and with non-binding limits on the blank job itself ("own"), in the
# same round, on a redis-server of the benchmark's own.
#
#   ruby bench/limits.rb              # N=300000 jobs, ROUNDS=5, -c 10
#   N=20000 ROUNDS=3 ruby bench/limits.rb
#
# Judged as bench/throughput.rb judges job lines: per round, the paired cost 1 − jobs/s(limits) /
# jobs/s(none) of drains run one right after the other (order alternating), and the median of
# those. The machine is shared; single drains swing by ±15%, so only the paired median means much.
require_relative "lib/drain_rounds"
require_relative "lib/log_cost"
require_relative "lib/throughput_run"

module Bench
  # ThroughputRun with bench/apps/limits_app.rb and BENCH_LIMITS set by kind.
  class LimitsRun < ThroughputRun
    def initialize(limits, redis, jobs:, concurrency:)
      super(:queue, redis, jobs: jobs, concurrency: concurrency)
      @limits = limits
      @done_file = File.join(redis.dir, "limits-#{limits}.done")
    end

    private

    def app_file = "limits_app.rb"

    def env = super.merge("BENCH_LIMITS" => @limits)
  end

  module Limits
    JOBS = Integer(ENV.fetch("N", "300000"))
    ROUNDS = Integer(ENV.fetch("ROUNDS", "5"))
    CONCURRENCY = 10
    KINDS = %w[none other own].freeze
    LABELS = {"none" => "no limits", "other" => "limits on another worker", "own" => "non-binding limits on the job"}.freeze
    TARGET_COST = 0.05

    module_function

    def run
      rounds, summary, machine = DrainRounds.run(ROUNDS, KINDS) { |redis, index| round(redis, index) }
      costs = %w[other own].to_h { |k| [k, LogCost.new(rounds, summary, on: k, off: "none", what: LABELS.fetch(k))] }
      print_report(rounds, summary, machine, costs)
      path = Report.write_json("limits", {
        "benchmark" => "limits", "jobs" => JOBS, "rounds" => ROUNDS, "concurrency" => CONCURRENCY, "machine" => machine,
        "runs" => rounds, "medians" => summary, "costs" => costs.transform_values(&:to_h)
      })
      puts "\nresults: #{path}"
    end

    def round(redis, index)
      order = index.odd? ? KINDS : KINDS.reverse
      order.to_h do |kind|
        warn "round #{index}/#{ROUNDS}: #{kind} draining #{JOBS} jobs..."
        [kind, LimitsRun.new(kind, redis, jobs: JOBS, concurrency: CONCURRENCY).call]
      end
    end

    def print_report(rounds, summary, machine, costs)
      puts "\nLimits: #{Report.num(JOBS)} blank jobs, -c #{CONCURRENCY}, median of #{ROUNDS} round(s)"
      puts Report.load_line(machine["loadavg_before"], machine["loadavg_after"])
      puts
      puts Report.table(Report::DRAIN_HEADER, KINDS.map { |k| Report.drain_row(LABELS.fetch(k), summary.fetch(k)) })
      costs.each_value { |c| puts c.report_lines }
      puts "\nEach round:"
      puts Report.rounds_table(rounds, KINDS)
      puts "\nTargets (reported, not asserted):"
      costs.each do |kind, c|
        puts Report.target("#{LABELS.fetch(kind)}: cost ≤ #{(TARGET_COST * 100).round}% of jobs/s", c.paired <= TARGET_COST,
          format("%.1f%% (median of the rounds' paired costs)", c.paired * 100))
      end
    end
  end
end

Bench::Limits.run if $PROGRAM_NAME == __FILE__
