#!/usr/bin/env ruby
# frozen_string_literal: true

# Scaling out on one host: blank jobs and jobs that sleep 1 ms, drained by one and by two processes
# with -c 10 each: queue (`queue`, and `queue cluster -n 2`) against the real Sidekiq 6.4.1 (one
# `sidekiq`, and two started side by side), in the same run, on a redis-server of the benchmark's own.
#
#   ruby bench/cluster.rb                     # N=50000 blank jobs, SLEEP_N=20000 sleep jobs, ROUNDS=3
#   N=20000 SLEEP_N=10000 ROUNDS=1 ruby bench/cluster.rb
#
# Each round drains every configuration once (the order alternates between rounds); the tables show
# the medians. The scaling factor is two processes' jobs/s over one's; Redis CPU per job comes from
# `INFO cpu` before and after each drain. How time and CPU are measured: bench/lib/cluster_run.rb.
require_relative "lib/drain_rounds"
require_relative "lib/cluster_run"

module Bench
  module Cluster
    JOBS = {blank: Integer(ENV.fetch("N", "50000")), sleep: Integer(ENV.fetch("SLEEP_N", "20000"))}.freeze
    ROUNDS = Integer(ENV.fetch("ROUNDS", "3"))
    CONCURRENCY = 10
    SERVERS = %i[sidekiq queue].freeze
    COUNTS = [1, 2].freeze
    # "sleep/queue/2", ...: every drain of a round.
    KINDS = %i[blank sleep].flat_map { |job| SERVERS.flat_map { |s| COUNTS.map { |n| "#{job}/#{s}/#{n}" } } }.freeze
    LABELS = {sidekiq: "Sidekiq #{Sidekiq::VERSION}", queue: "queue #{JobQueue::VERSION}"}.freeze
    # The issue's goal (reported, not asserted): two processes at least this much faster than one.
    TARGET_SLEEP_SCALING = 1.6
    HEADER = ["", "jobs/s", "server CPU µs/job", "Redis CPU µs/job", "server cores", "Redis cores", "other cores", "drain s"].freeze

    module_function

    def run
      rounds, summary, machine = DrainRounds.run(ROUNDS, KINDS) { |redis, index| round(redis, index) }
      print_report(rounds, summary, machine)
      path = Report.write_json("cluster", {
        "benchmark" => "cluster", "jobs" => JOBS, "rounds" => ROUNDS, "concurrency" => CONCURRENCY,
        "machine" => machine, "runs" => rounds, "medians" => summary, "scaling" => scalings(summary)
      })
      puts "\nresults: #{path}"
    end

    def round(redis, index)
      order = index.odd? ? KINDS : KINDS.reverse
      order.to_h do |kind|
        job, server, count = kind.split("/")
        warn "round #{index}/#{ROUNDS}: #{server} x#{count} draining #{JOBS.fetch(job.to_sym)} #{job} jobs..."
        [kind, ClusterRun.new(server.to_sym, job.to_sym, Integer(count), redis, jobs: JOBS.fetch(job.to_sym), concurrency: CONCURRENCY).call]
      end
    end

    # Two processes' jobs/s over one's, for each job and server.
    def scalings(summary)
      %w[blank sleep].to_h do |job|
        [job, SERVERS.to_h { |s| [s.to_s, Report.ratio(summary.fetch("#{job}/#{s}/2")["jobs_per_s"], summary.fetch("#{job}/#{s}/1")["jobs_per_s"])] }]
      end
    end

    def row(label, m)
      [label, Report.num(m["jobs_per_s"]), Report.num(m["server_cpu_us_per_job"], 1), Report.num(m["redis_cpu_us_per_job"], 1),
        Report.num(m["server_cores"], 2), Report.num(m["redis_cores"], 2), Report.num(m["other_processes_cores"], 2), Report.num(m["seconds"], 2)]
    end

    def print_report(rounds, summary, machine)
      scaling = scalings(summary)
      puts "\nCluster: -c #{CONCURRENCY} per process, 1 and 2 processes, median of #{ROUNDS} round(s)"
      puts Report.load_line(machine["loadavg_before"], machine["loadavg_after"])
      %w[blank sleep].each do |job|
        puts "\n#{job == "blank" ? "Blank jobs" : "Jobs sleeping 1 ms"} (#{Report.num(JOBS.fetch(job.to_sym))} a drain)"
        rows = SERVERS.flat_map { |s| COUNTS.map { |n| row("#{LABELS.fetch(s)}, #{n} process#{n > 1 ? "es" : ""}", summary.fetch("#{job}/#{s}/#{n}")) } }
        puts Report.table(HEADER, rows)
        SERVERS.each { |s| puts "#{LABELS.fetch(s)}: 2 processes / 1 = #{Report.times(scaling.dig(job, s.to_s))}" }
        COUNTS.each do |n|
          r = Report.ratio(summary.fetch("#{job}/queue/#{n}")["jobs_per_s"], summary.fetch("#{job}/sidekiq/#{n}")["jobs_per_s"])
          puts "queue / Sidekiq with #{n} process#{n > 1 ? "es" : ""}: #{Report.times(r)}"
        end
      end
      puts "\nEach round:"
      puts Report.table(HEADER, rounds.each_with_index.flat_map { |rd, i| KINDS.map { |k| row("#{i + 1}: #{k}", rd.fetch(k)) } })
      puts "\nTargets (reported, not asserted):"
      s = scaling.dig("sleep", "queue")
      puts Report.target("queue, 1 ms-sleep jobs: 2 processes ≥ #{TARGET_SLEEP_SCALING}× one", s >= TARGET_SLEEP_SCALING, Report.times(s))
      puts "  (blank jobs: #{Report.times(scaling.dig("blank", "queue"))}; see the cores columns for where the #{Cpu.cores} cores went)"
    end
  end
end

Bench::Cluster.run if $PROGRAM_NAME == __FILE__
