#!/usr/bin/env ruby
# frozen_string_literal: true

# I/O-bound jobs (issue #27, point 1): jobs that sleep 1 ms or 10 ms, as jobs waiting on a database or
# an HTTP call do, drained by queue `-c N` and by the real Sidekiq 6.4.1 `-c N`, against the ceiling:
# N bare Ruby threads in one process looping on the same sleep (bench/lib/io_ceiling.rb), all in the
# same run, on a redis-server of the benchmark's own (over TCP), every server at WARN.
#
#   ruby bench/io_bound.rb                       # DRAIN_SECONDS=2 of ceiling work per drain, ROUNDS=5
#   DRAIN_SECONDS=1 ROUNDS=1 ruby bench/io_bound.rb    # a quick look
#   ONLY=c25_1ms ruby bench/io_bound.rb          # one configuration
#
# Configurations: (-c 25, 1 ms), (-c 50, 1 ms), (-c 50, 10 ms). Each drains concurrency × DRAIN_SECONDS /
# sleep jobs (about DRAIN_SECONDS at the ceiling). Each round runs the ceiling, queue and Sidekiq once per
# configuration (the order alternates between rounds); the tables show the medians, and the goals are
# judged on the median of the rounds' paired ratios (queue / ceiling ≥ 95%; queue / Sidekiq shown).
# Besides time and CPU per job: the server's context switches per job (every thread) and its fetch
# calls per job (bench/lib/io_run.rb). How a drain is timed: bench/lib/throughput_run.rb.
require_relative "lib/drain_rounds"
require_relative "lib/io_run"

module Bench
  module IoBound
    ROUNDS = Integer(ENV.fetch("ROUNDS", "5"))
    SECONDS = Float(ENV.fetch("DRAIN_SECONDS", "2"))
    CONFIGS = {"c25_1ms" => [25, 0.001], "c50_1ms" => [50, 0.001], "c50_10ms" => [50, 0.010]}
      .select { |name, _| ENV["ONLY"].nil? || ENV["ONLY"].split(",").include?(name) }.freeze
    # SERVERS=ceiling,queue leaves Sidekiq out (an A/B of two builds of queue, in half the time).
    SERVERS = (%w[ceiling queue sidekiq] & ENV.fetch("SERVERS", "ceiling,queue,sidekiq").split(",")).freeze
    KINDS = CONFIGS.keys.flat_map { |c| SERVERS.map { |s| "#{c}/#{s}" } }.freeze
    LABELS = {"ceiling" => "bare Ruby threads", "queue" => "queue #{JobQueue::VERSION}", "sidekiq" => "Sidekiq #{Sidekiq::VERSION}"}.freeze
    # The issue's goal (reported, not asserted).
    TARGET_OF_CEILING = 0.95
    FIELDS = (Report::DRAIN_FIELDS + %w[voluntary_switches_per_job involuntary_switches_per_job fetches_per_job]).freeze
    HEADER = ["", "jobs/s", "server CPU µs/job", "Redis CPU µs/job", "switches/job (vol+invol)", "fetches/job", "drain s"].freeze

    module_function

    def jobs(config)
      concurrency, pause = CONFIGS.fetch(config)
      (concurrency * SECONDS / pause).round
    end

    def run
      abort "ONLY=#{ENV["ONLY"]}: no such configuration (#{%w[c25_1ms c50_1ms c50_10ms].join(", ")})" if CONFIGS.empty?
      abort "SERVERS=#{ENV["SERVERS"]}: ceiling and queue are always measured (Sidekiq may be left out)" unless (%w[ceiling queue] - SERVERS).empty?
      rounds, _, machine = DrainRounds.run(ROUNDS, KINDS) { |redis, index| round(redis, index) }
      summary = KINDS.to_h { |k| [k, Report.medians(rounds.map { |r| r[k] }, FIELDS)] }
      print_report(rounds, summary, machine)
      path = Report.write_json("io_bound", {
        "benchmark" => "io_bound", "rounds" => ROUNDS, "seconds" => SECONDS,
        "configurations" => CONFIGS.to_h { |c, (n, s)| [c, {"concurrency" => n, "sleep" => s, "jobs" => jobs(c)}] },
        "machine" => machine, "runs" => rounds, "medians" => summary, "ratios" => CONFIGS.keys.to_h { |c| [c, ratios(rounds, c)] }
      })
      puts "\nresults: #{path}"
    end

    def round(redis, index)
      order = index.odd? ? KINDS : KINDS.reverse
      order.to_h do |kind|
        config, server = kind.split("/")
        concurrency, pause = CONFIGS.fetch(config)
        warn "round #{index}/#{ROUNDS}: #{server} -c #{concurrency}, #{jobs(config)} jobs of #{(pause * 1000).round} ms..."
        [kind, measure(server, redis, jobs: jobs(config), concurrency: concurrency, sleep: pause)]
      end
    end

    def measure(server, redis, **config)
      return IoCeiling.new(**config).call if server == "ceiling"

      IoRun.new(server.to_sym, redis, **config).call
    end

    # The rounds' paired ratios of jobs/s and their medians.
    def ratios(rounds, config)
      per_round = ->(a, b) { rounds.map { |rd| Report.ratio(rd.dig("#{config}/#{a}", "jobs_per_s"), rd.dig("#{config}/#{b}", "jobs_per_s")) } }
      of_ceiling = per_round.("queue", "ceiling")
      of_sidekiq = per_round.("queue", "sidekiq")
      sidekiq_of_ceiling = per_round.("sidekiq", "ceiling")
      {"queue_of_ceiling" => Report.median(of_ceiling), "queue_of_sidekiq" => Report.median(of_sidekiq),
       "sidekiq_of_ceiling" => Report.median(sidekiq_of_ceiling),
       "queue_of_ceiling_by_round" => of_ceiling, "queue_of_sidekiq_by_round" => of_sidekiq}
    end

    def row(label, m)
      [label, Report.num(m["jobs_per_s"]), Report.num(m["server_cpu_us_per_job"], 1), Report.num(m["redis_cpu_us_per_job"], 1),
        "#{Report.num(m["voluntary_switches_per_job"], 2)}+#{Report.num(m["involuntary_switches_per_job"], 2)}",
        Report.num(m["fetches_per_job"], 3), Report.num(m["seconds"], 2)]
    end

    def pct(value) = value.nil? ? "-" : format("%.1f%%", value * 100)

    def print_report(rounds, summary, machine)
      puts "\nI/O-bound jobs: #{ROUNDS} round(s), ~#{SECONDS} s of ceiling work per drain, medians"
      puts Report.load_line(machine["loadavg_before"], machine["loadavg_after"])
      CONFIGS.each do |config, (concurrency, pause)|
        puts "\n-c #{concurrency}, jobs sleeping #{(pause * 1000).round} ms (#{Report.num(jobs(config))} jobs a drain)"
        puts Report.table(HEADER, SERVERS.map { |s| row(LABELS.fetch(s), summary.fetch("#{config}/#{s}")) })
        r = ratios(rounds, config)
        puts "queue / ceiling in each round: #{r["queue_of_ceiling_by_round"].map { |v| pct(v) }.join(", ")}; " \
          "queue / Sidekiq: #{r["queue_of_sidekiq_by_round"].map { |v| Report.times(v) }.join(", ")}"
      end
      puts "\nEach round:"
      puts Report.table(HEADER, rounds.each_with_index.flat_map { |rd, i| KINDS.map { |k| row("#{i + 1}: #{k}", rd.fetch(k)) } })
      puts "\nTargets (reported, not asserted; medians of the rounds' paired ratios):"
      CONFIGS.each do |config, (concurrency, pause)|
        r = ratios(rounds, config)
        what = "-c #{concurrency}, #{(pause * 1000).round} ms jobs"
        puts Report.target("#{what}: queue ≥ #{(TARGET_OF_CEILING * 100).round}% of the bare-Ruby ceiling", r["queue_of_ceiling"].to_f >= TARGET_OF_CEILING,
          "#{pct(r["queue_of_ceiling"])} (Sidekiq #{pct(r["sidekiq_of_ceiling"])}); queue / Sidekiq #{Report.times(r["queue_of_sidekiq"])}")
      end
    end
  end
end

Bench::IoBound.run if $PROGRAM_NAME == __FILE__
