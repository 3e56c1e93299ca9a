#!/usr/bin/env ruby
# frozen_string_literal: true

# Enqueue rate: Sidekiq 6.4.1's client against queue's, in the same run, on a redis-server of the
# benchmark's own.
#
#   ruby bench/enqueue.rb             # M=20000 one by one, BULK_M=100000 in bulk, ROUNDS=3
#   M=5000 BULK_M=20000 ROUNDS=2 ruby bench/enqueue.rb
#   MODES=one_by_one,threads ROUNDS=5 ruby bench/enqueue.rb   # one thread and 16 (THREADS=16)
#   BASELINE=path/to/main-run.json MODES=one_by_one,threads ROUNDS=5 ruby bench/enqueue.rb
#
# A single thread's push must be no slower than before the shared connection: one process cannot
# load two builds of the extension, so the one-by-one row is judged by its ratio to Sidekiq in the
# same run (the median of the rounds' ratios) against the same figure in BASELINE, the JSON of a run
# of the previous build (main's) on the same machine; within ONE_THREAD_TOLERANCE (5 %) counts as
# no slower. Without BASELINE the row is printed and not judged. The 16-thread target is judged on
# the median of the rounds' ratios too.
#
# The mode `threads` pushes M jobs one by one from THREADS threads at once (M / THREADS each), as a
# Puma app's threads do; Sidekiq's client then gets a connection pool of THREADS connections (its
# default is 5), queue's threads share one connection whose concurrent pushes go out together
# (`link/combining.rs`). It runs only when MODES names it.
#
# Each round pushes M blank jobs with each client one by one (`perform_async`), and BULK_M in bulk
# (`perform_bulk`, batches of 1000; more jobs than one by one because a bulk push of 20,000 takes
# only ~0.2 s, too short to time on a busy machine). The order of the clients alternates between
# rounds, and the table shows the medians. A short warm-up of each client comes first.
#
# Between the two clients, each round also times M bare `PING`s through queue's engine: no push can
# take less than that round trip, so Sidekiq's time per push over it is the highest one-by-one ratio
# any client could reach against Sidekiq on this machine at that moment (the "ceiling"). It also
# prints the CPU of a push, the client's and Redis's added up, against Sidekiq's: the part a client
# controls. The round trip's wake-ups count in neither process's CPU, which is why the jobs/s ratio
# stays below it (bench/README.md).
require_relative "lib/clients"
require_relative "lib/redis_server"
require_relative "lib/report"
require_relative "lib/enqueue_run"

module Bench
  # Runs the rounds and prints and records the results.
  module Enqueue
    JOBS = {
      one_by_one: Integer(ENV.fetch("M", "20000")), bulk: Integer(ENV.fetch("BULK_M", "100000")),
      threads: Integer(ENV.fetch("M", "20000"))
    }.freeze
    MODES = ENV.fetch("MODES", "one_by_one,bulk").split(",").map(&:to_sym).freeze
    # The threads mode's 8× target is judged on the median of at least five rounds.
    ROUNDS = Integer(ENV.fetch("ROUNDS", MODES.include?(:threads) ? "5" : "3"))
    WARMUP = 1000
    KINDS = %i[sidekiq queue].freeze
    FIELDS = %w[jobs_per_s client_cpu_us_per_job redis_cpu_us_per_job seconds other_processes_cores].freeze
    LABELS = {sidekiq: "Sidekiq #{Sidekiq::VERSION}", queue: "queue #{JobQueue::VERSION}", round_trip: "bare round trip (PING)"}.freeze
    MODE_LABELS = {
      one_by_one: "#{Report.num(JOBS[:one_by_one])} one by one (perform_async)",
      bulk: "#{Report.num(JOBS[:bulk])} in bulk (perform_bulk, 1000 a batch)",
      threads: "#{Report.num(JOBS[:threads])} one by one from #{EnqueueRun::THREADS} threads (perform_async)"
    }.freeze
    TARGET_SPEEDUP = 2.0
    TARGET_THREADS_SPEEDUP = 8.0
    BASELINE = ENV["BASELINE"]
    ONE_THREAD_TOLERANCE = 0.05

    module_function

    def run
      redis = RedisServer.new.start
      Clients.configure(redis.url)
      Clients.pool(redis.url, EnqueueRun::THREADS) if MODES.include?(:threads)
      warm_up(redis)
      load_before = Cpu.loadavg
      rounds = (1..ROUNDS).map { |i| round(redis, i) }
      load_after = Cpu.loadavg
      summary = summarize(rounds)
      print_report(rounds, summary, load_before, load_after)
      path = Report.write_json("enqueue", {
        "benchmark" => "enqueue", "jobs" => JOBS.transform_keys(&:to_s), "rounds" => ROUNDS,
        "machine" => Report.machine(redis.version).merge("loadavg_before" => load_before, "loadavg_after" => load_after),
        "runs" => rounds, "medians" => summary, "baseline" => BASELINE
      })
      puts "\nresults: #{path}"
    ensure
      redis&.stop
    end

    def warm_up(redis)
      KINDS.product(MODES).each { |kind, mode| EnqueueRun.new(kind, mode, redis, jobs: WARMUP).call }
      EnqueueRun.new(:round_trip, :one_by_one, redis, jobs: WARMUP).call
    end

    # One round: a list of results, each client in each mode once, and the bare round trip between
    # the two clients.
    def round(redis, index)
      first, second = index.odd? ? KINDS : KINDS.reverse
      warn "round #{index}/#{ROUNDS}: #{first}, round trip, #{second}..."
      run = ->(kind, mode) { EnqueueRun.new(kind, mode, redis, jobs: JOBS.fetch(mode)).call }
      MODES.map { |mode| run.(first, mode) } + [run.(:round_trip, :one_by_one)] + MODES.map { |mode| run.(second, mode) }
    end

    # {"one_by_one" => {"sidekiq" => medians, "queue" => medians, "round_trip" => medians,
    #  "ratios" => {...}, "ceiling" => x, "cpu_per_push_ratio" => y}, "bulk" => ...}
    def summarize(rounds)
      MODES.to_h do |mode|
        kinds = mode == :one_by_one ? KINDS + [:round_trip] : KINDS
        per_kind = kinds.to_h do |kind|
          results = rounds.flatten.select { |r| r["client"] == kind.to_s && r["mode"] == mode.to_s }
          [kind.to_s, Report.medians(results, FIELDS)]
        end
        q, s = per_kind.fetch("queue"), per_kind.fetch("sidekiq")
        summary = per_kind.merge("ratios" => FIELDS.first(3).to_h { |f| [f, Report.ratio(q[f], s[f])] })
        if mode == :one_by_one
          summary["ceiling"] = Report.median(round_ratios(rounds, mode, "round_trip"))
          summary["cpu_per_push_ratio"] = Report.median(cpu_ratios(rounds))
        end
        [mode.to_s, summary]
      end
    end

    def print_report(rounds, summary, load_before, load_after)
      puts "\nEnqueue: blank jobs, median of #{ROUNDS} round(s)"
      puts Report.load_line(load_before, load_after)
      header = ["", "jobs/s", "client CPU µs/job", "Redis CPU µs/job", "seconds", "other procs (cores)"]
      MODES.each do |mode|
        s = summary.fetch(mode.to_s)
        rows = (KINDS + [:round_trip]).filter_map { |k| s[k.to_s] && row(LABELS.fetch(k), s.fetch(k.to_s)) }
        r = s.fetch("ratios")
        rows << ["queue / Sidekiq", Report.times(r["jobs_per_s"]), Report.times(r["client_cpu_us_per_job"]), Report.times(r["redis_cpu_us_per_job"]), "", ""]
        puts "\n#{MODE_LABELS.fetch(mode)}"
        puts Report.table(header, rows)
        puts "queue / Sidekiq jobs/s in each round: #{round_ratios(rounds, mode).map { |x| Report.times(x) }.join(", ")}"
        next unless s.key?("ceiling")

        print_ceiling(rounds, s)
        print_cpu(rounds, s)
      end
      puts "(ratios of CPU per job: lower is better for queue)"
      puts "\nEach round:"
      rows = rounds.each_with_index.flat_map { |rd, i| rd.map { |r| row("#{i + 1}: #{r["client"]} #{r["mode"]}", r) } }
      puts Report.table(header, rows)
      speedup = summary.dig("one_by_one", "ratios", "jobs_per_s")
      puts "\nTarget (reported, not asserted):"
      one = summary.fetch("one_by_one")
      puts "  #{speedup >= TARGET_SPEEDUP ? "met   " : "MISSED"}  one-by-one enqueue ≥ #{TARGET_SPEEDUP}× Sidekiq: #{Report.times(speedup)} " \
        "(ceiling #{Report.times(one["ceiling"])}; Sidekiq's CPU per push over queue's #{Report.times(one["cpu_per_push_ratio"])})"
      print_one_thread(rounds)
      return unless summary.key?("threads")

      # Judged on the median of the rounds' paired ratios (each round's two clients ran seconds
      # apart); the ratio of the medians is shown beside it.
      threaded = Report.median(round_ratios(rounds, :threads))
      puts "  #{threaded >= TARGET_THREADS_SPEEDUP ? "met   " : "MISSED"}  enqueue from #{EnqueueRun::THREADS} threads ≥ " \
        "#{TARGET_THREADS_SPEEDUP}× Sidekiq: #{Report.times(threaded)}, median of the rounds' ratios (ratio of the medians " \
        "#{Report.times(summary.dig("threads", "ratios", "jobs_per_s"))}; queue #{Report.num(summary.dig("threads", "queue", "jobs_per_s"))}/s, " \
        "one thread #{Report.num(one.dig("queue", "jobs_per_s"))}/s)"
    end

    # The one-by-one ratio to Sidekiq against the baseline run's (see BASELINE above).
    def print_one_thread(rounds)
      speedup = Report.median(round_ratios(rounds, :one_by_one))
      unless BASELINE
        puts "  (not judged) one thread no slower than main's: #{Report.times(speedup)} Sidekiq here; set BASELINE to main's enqueue JSON"
        return
      end
      before = Report.median(round_ratios(JSON.parse(File.read(BASELINE)).fetch("runs"), :one_by_one))
      met = speedup >= before * (1 - ONE_THREAD_TOLERANCE)
      puts "  #{met ? "met   " : "MISSED"}  one thread no slower than main's (within #{(ONE_THREAD_TOLERANCE * 100).round} %): " \
        "#{Report.times(speedup)} Sidekiq against #{Report.times(before)} in #{File.basename(BASELINE)} (medians of the rounds' ratios)"
    end

    # How close to a bare round trip each push is: the ceiling is the round trip's rate over
    # Sidekiq's, the highest queue / Sidekiq any one-by-one client could have reached in the round.
    def print_ceiling(rounds, summary)
      ceilings = round_ratios(rounds, :one_by_one, "round_trip")
      share = Report.ratio(summary.dig("queue", "jobs_per_s"), summary.dig("round_trip", "jobs_per_s"))
      puts "ceiling (bare round trip / Sidekiq) in each round: #{ceilings.map { |x| Report.times(x) }.join(", ")}; " \
        "median #{Report.times(summary["ceiling"])}"
      puts "a queue push runs at #{format("%.0f%%", share * 100)} of the bare round trip's rate (medians)"
    end

    # The CPU a push costs, the client's and Redis's together, Sidekiq's over queue's: what the push
    # path controls.
    def print_cpu(rounds, summary)
      q, s = %w[queue sidekiq].map { |k| push_cpu(summary.fetch(k)) }
      puts "CPU per push, client and Redis together: queue #{Report.num(q, 1)} µs, Sidekiq #{Report.num(s, 1)} µs (medians); " \
        "Sidekiq's over queue's in each round: #{cpu_ratios(rounds).map { |x| Report.times(x) }.join(", ")}"
    end

    def cpu_ratios(rounds)
      rounds.map do |rd|
        find = ->(k) { rd.find { |r| r["client"] == k && r["mode"] == "one_by_one" } }
        Report.ratio(push_cpu(find.("sidekiq")), push_cpu(find.("queue")))
      end
    end

    def push_cpu(result)
      result["client_cpu_us_per_job"] + result["redis_cpu_us_per_job"]
    end

    # `kind`'s rate (queue's unless given) over Sidekiq's within each round (they ran seconds apart).
    def round_ratios(rounds, mode, kind = "queue")
      rounds.map do |rd|
        rate = ->(k) { rd.find { |r| r["client"] == k && r["mode"] == mode.to_s }["jobs_per_s"] }
        Report.ratio(rate.(kind), rate.("sidekiq"))
      end
    end

    def row(label, m)
      [label, Report.num(m["jobs_per_s"]), Report.num(m["client_cpu_us_per_job"], 1), Report.num(m["redis_cpu_us_per_job"], 1), Report.num(m["seconds"], 2),
        Report.num(m["other_processes_cores"], 2)]
    end
  end
end

Bench::Enqueue.run if $PROGRAM_NAME == __FILE__
