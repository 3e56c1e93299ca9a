# frozen_string_literal: true

require_relative "report"

module Bench
  # What queue's per-job log lines cost in throughput.rb: the `queue_logs` drain (lines on) against
  # the `queue` drain (lines off) of the same round, which run one right after the other (their order
  # alternating between rounds). Each round gives a paired cost, so a round in which the whole machine
  # is slower moves both of its drains alike; the median of those paired costs is the figure the
  # target is judged on. The cost computed from the two kinds' medians is shown beside it.
  #
  # The same pairing measures what writing Sidekiq's Metrics page data costs (`on: "queue"`, the
  # default `sidekiq_metrics = 7`, against `off: "queue_nosk"`, `sidekiq_metrics = false`).
  class LogCost
    def initialize(rounds, summary, on: "queue_logs", off: "queue", what: "job lines")
      @rounds = rounds
      @summary = summary
      @on = on
      @off = off
      @what = what
    end

    # 1 − (jobs/s on) / (jobs/s off), per round.
    def per_round = @rounds.map { |rd| cost(rd.fetch(@on), rd.fetch(@off)) }

    def paired = Report.median(per_round)

    def of_medians = cost(@summary.fetch(@on), @summary.fetch(@off))

    # Server CPU µs/job on minus off, per round.
    def cpu_per_round = @rounds.map { |rd| cpu(rd.fetch(@on)) - cpu(rd.fetch(@off)) }

    def to_h
      {"paired_median" => paired, "of_medians" => of_medians, "per_round" => per_round,
       "server_cpu_us_per_job_per_round" => cpu_per_round}
    end

    def report_lines
      [
        "#{@what}' cost in jobs/s, each round (on vs off, same round): #{per_round.map { |c| percent(c) }.join(", ")}",
        "  median of the rounds #{percent(paired)}; from the medians #{percent(of_medians)}",
        "#{@what}' server CPU, each round: #{cpu_per_round.map { |d| format("%+.1f", d) }.join(", ")} µs/job " \
          "(median #{format("%+.2f", Report.median(cpu_per_round))}; medians #{cpu_text})"
      ]
    end

    private

    def cost(on, off) = 1 - on.fetch("jobs_per_s") / off.fetch("jobs_per_s")

    def cpu(run) = run.fetch("server_cpu_us_per_job")

    def percent(value) = format("%+.1f%%", value * 100)

    def cpu_text
      "#{Report.num(cpu(@summary.fetch(@on)), 1)} on, #{Report.num(cpu(@summary.fetch(@off)), 1)} off"
    end
  end
end
