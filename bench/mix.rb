#!/usr/bin/env ruby
# frozen_string_literal: true

# A realistic mix (issue #27, point 4): jobs that read one row from SQLite and make one Redis call
# through the app's own redis gem (bench/apps/mix_work.rb), run by the real Sidekiq 6.4.1 and by
# queue, in the same run, on a redis-server of the benchmark's own.
#
#   ruby bench/mix.rb                       # N=20000 jobs a drain, ROUNDS=5, -c 10 and -c 25; RSS_N=1000000 at RSS_C=10,25
#   N=5000 ROUNDS=5 RSS_N=100000 ruby bench/mix.rb
#   RSS_N=0 ruby bench/mix.rb               # throughput only
#   N=0 ruby bench/mix.rb                   # RSS only
#
# 1. Throughput: each round drains N jobs with each server at each concurrency (the order of the
#    servers alternating between rounds); jobs/s, server and Redis CPU per job, the median of the
#    rounds, and queue / Sidekiq.
# 2. Memory: each server drains RSS_N jobs at each concurrency of RSS_C (pushed in slices while it
#    runs); VmRSS and VmHWM when it takes its first job, every RSS_N / 10 jobs, and at the end.
#    Goal: queue's VmRSS at the end ≤ 0.5× Sidekiq's, at each concurrency.
#    Beside them, the floor (bench/lib/mix_floor.rb): bare Ruby threads running the same RSS_N jobs
#    with no server, once as Ruby and glibc start by default and once with queue's memory settings
#    (2 malloc arenas, the malloc-driven GC, malloc_trim): what the app alone holds, and so what
#    queue adds over it. FLOOR=0 leaves it out.
require_relative "lib/clients"
require_relative "lib/cpu"
require_relative "lib/floor_rss_run"
require_relative "lib/mix_db"
require_relative "lib/mix_run"
require_relative "lib/redis_server"
require_relative "lib/report"
require_relative "lib/rss_run"

module Bench
  module Mix
    JOBS = Integer(ENV.fetch("N", "20000"))
    ROUNDS = Integer(ENV.fetch("ROUNDS", "5"))
    CONCURRENCIES = [10, 25].freeze
    SERVERS = %i[sidekiq queue].freeze
    RSS_JOBS = Integer(ENV.fetch("RSS_N", "1000000"))
    RSS_CONCURRENCIES = ENV.fetch("RSS_C", "10,25").split(",").map { |c| Integer(c) }.freeze
    TARGET_RSS = 0.5
    FLOOR = ENV.fetch("FLOOR", "1") != "0"
    LABELS = {sidekiq: "Sidekiq #{Sidekiq::VERSION}", queue: "queue #{JobQueue::VERSION}",
              floor: "bare Ruby, no server", floor_settings: "bare Ruby, no server, queue's memory settings"}.freeze
    # What a queue server applies by default (lib/queue/configuration.rb), for the floor's second run.
    QUEUE_MEMORY = {arena_max: JobQueue::Configuration::DEFAULT_MALLOC_ARENA_MAX,
                    gc_growth: JobQueue::Configuration::DEFAULT_GC_MALLOC_GROWTH,
                    trim_interval: JobQueue::Configuration::DEFAULT_MALLOC_TRIM_INTERVAL}.freeze

    module_function

    def run
      redis = RedisServer.new.start
      Clients.configure(redis.url)
      db = MixDb.create(redis.dir)
      before = Cpu.loadavg
      rounds = JOBS.positive? ? (1..ROUNDS).map { |index| round(redis, db, index) } : []
      rss = RSS_JOBS.positive? ? rss_runs(redis, db) : {}
      machine = Report.machine(redis.version).merge("loadavg_before" => before, "loadavg_after" => Cpu.loadavg)
      summary = summarize(rounds)
      print_report(rounds, summary, rss, machine)
      path = Report.write_json("mix", {
        "benchmark" => "mix", "jobs" => JOBS, "rounds" => ROUNDS, "concurrencies" => CONCURRENCIES,
        "machine" => machine, "runs" => rounds, "medians" => summary, "rss" => rss
      })
      puts "\nresults: #{path}"
    ensure
      redis&.stop
    end

    def key(kind, concurrency) = "#{kind}_c#{concurrency}"

    def round(redis, db, index)
      CONCURRENCIES.each_with_object({}) do |c, out|
        (index.odd? ? SERVERS : SERVERS.reverse).each do |kind|
          warn "round #{index}/#{ROUNDS}: #{kind} -c #{c} draining #{JOBS} mix jobs..."
          out[key(kind, c)] = MixRun.new(kind, redis, db: db, jobs: JOBS, concurrency: c).call
        end
      end
    end

    # {"c10" => {"sidekiq" => run, "queue" => run}, ...}
    def rss_runs(redis, db)
      every = [RSS_JOBS / 10, 1].max
      RSS_CONCURRENCIES.to_h do |c|
        runs = SERVERS.to_h do |kind|
          warn "memory: #{kind} -c #{c} draining #{RSS_JOBS} mix jobs..."
          [kind.to_s, RssRun.new(kind, redis, db: db, jobs: RSS_JOBS, concurrency: c, every: every).call]
        end
        ["c#{c}", FLOOR ? runs.merge(floor_runs(redis, db, c, every)) : runs]
      end
    end

    # The floor at concurrency `c`: {"floor" => run, "floor_settings" => run}.
    def floor_runs(redis, db, c, every)
      {floor: nil, floor_settings: QUEUE_MEMORY}.to_h do |kind, settings|
        warn "memory: #{LABELS.fetch(kind)}, #{c} threads running #{RSS_JOBS} mix jobs..."
        [kind.to_s, FloorRssRun.new(redis, db: db, jobs: RSS_JOBS, concurrency: c, every: every, settings: settings).call]
      end
    end

    def summarize(rounds)
      return {} if rounds.empty?

      keys = rounds.first.keys
      medians = keys.to_h { |k| [k, Report.medians(rounds.map { |r| r[k] }, Report::DRAIN_FIELDS)] }
      ratios = CONCURRENCIES.to_h do |c|
        paired = rounds.map { |r| Report.ratio(r.dig(key(:queue, c), "jobs_per_s"), r.dig(key(:sidekiq, c), "jobs_per_s")) }
        ["c#{c}", Report.drain_ratios(medians.fetch(key(:queue, c)), medians.fetch(key(:sidekiq, c)))
          .merge("paired_jobs_per_s" => Report.median(paired), "each_round" => paired)]
      end
      {"medians" => medians, "ratios" => ratios}
    end

    def print_report(rounds, summary, rss, machine)
      puts "\nMix: jobs reading one SQLite row and making one Redis INCR (redis gem #{Redis::VERSION}, ConnectionPool)"
      puts Report.load_line(machine["loadavg_before"], machine["loadavg_after"])
      print_throughput(rounds, summary) unless rounds.empty?
      rss.each_value { |runs| print_rss(runs) }
      print_goals(rss) unless rss.empty?
    end

    def print_throughput(rounds, summary)
      puts "\nThroughput: #{Report.num(JOBS)} jobs a drain, median of #{ROUNDS} round(s)\n\n"
      rows = CONCURRENCIES.flat_map do |c|
        r = summary.dig("ratios", "c#{c}")
        SERVERS.map { |kind| Report.drain_row("#{LABELS.fetch(kind)} -c #{c}", summary.dig("medians", key(kind, c))) } +
          [Report.drain_ratio_row("queue / Sidekiq -c #{c}", r)]
      end
      puts Report.table(Report::DRAIN_HEADER, rows)
      puts "(ratios of CPU per job: lower is better for queue)"
      CONCURRENCIES.each do |c|
        r = summary.dig("ratios", "c#{c}")
        puts "queue / Sidekiq jobs/s at -c #{c} in each round: #{r["each_round"].map { |x| Report.times(x) }.join(", ")}" \
          " (median #{Report.times(r["paired_jobs_per_s"])})"
      end
      puts "\nEach round:"
      puts Report.rounds_table(rounds, rounds.first.keys)
      puts "\nNo throughput goal for the mix in issue #27 (reported): queue / Sidekiq jobs/s " +
        CONCURRENCIES.map { |c| "-c #{c} #{Report.times(summary.dig("ratios", "c#{c}", "jobs_per_s"))}" }.join(", ")
    end

    def print_rss(rss)
      jobs = rss.values.first["jobs"]
      puts "\nMemory: #{Report.num(jobs)} jobs drained at -c #{rss.values.first["concurrency"]}, VmRSS / VmHWM in MB\n\n"
      points = ["start", *rss.values.first["progress"].map { |p| Report.num(p["jobs"]) }, "end"]
      rows = rss.map do |kind, run|
        cells = [run["start"], *run["progress"], run["end"]].map { |s| "#{mb(s["VmRSS"])} / #{mb(s["VmHWM"])}" }
        [LABELS.fetch(kind.to_sym), *cells]
      end
      puts Report.table(["", *points], rows)
      rss.each do |kind, run|
        e = run["end"]
        puts "#{LABELS.fetch(kind.to_sym)} at the end: #{e["Threads"]} threads, RssAnon #{mb(e["RssAnon"])} MB, " \
          "RssFile #{mb(e["RssFile"])} MB, Pss #{mb(e.dig("smaps_rollup", "Pss"))} MB; drain #{Report.num(run["seconds"], 1)} s"
      end
    end

    def print_goals(rss)
      puts "\nGoal (issue #27 point 4):"
      rss.each_value do |runs|
        ratio = Report.ratio(runs.dig("queue", "end", "VmRSS").to_f, runs.dig("sidekiq", "end", "VmRSS").to_f)
        hwm = Report.ratio(runs.dig("queue", "end", "VmHWM").to_f, runs.dig("sidekiq", "end", "VmHWM").to_f)
        what = "queue's VmRSS after #{Report.num(runs.dig("queue", "jobs"))} jobs at -c #{runs.dig("queue", "concurrency")} ≤ #{TARGET_RSS}× Sidekiq's"
        puts Report.target(what, ratio <= TARGET_RSS, "#{Report.times(ratio)} (VmHWM #{Report.times(hwm)})")
        print_floor(runs)
      end
    end

    # What the floor says of the goal: the floor against Sidekiq's half, and what queue adds over it.
    def print_floor(runs)
      sidekiq = runs.dig("sidekiq", "end", "VmRSS").to_f
      queue = runs.dig("queue", "end", "VmRSS").to_f
      %w[floor floor_settings].each do |kind|
        floor = runs.dig(kind, "end", "VmRSS") or next
        puts "  #{LABELS.fetch(kind.to_sym)}: #{mb(floor)} MB, #{Report.times(Report.ratio(floor.to_f, sidekiq))} Sidekiq's " \
          "(its half: #{mb(sidekiq / 2)} MB); queue #{mb((queue - floor).abs)} MB #{queue >= floor ? "above" : "below"} it"
      end
    end

    def mb(kb) = Report.num(kb / 1024.0, 1)
  end
end

Bench::Mix.run if $PROGRAM_NAME == __FILE__
