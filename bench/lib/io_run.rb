# frozen_string_literal: true

require "json"
require "open3"
require_relative "throughput_run"

module Bench
  # Switches of every thread of process `pid` so far: [voluntary, involuntary] (the sums of
  # /proc/<pid>/task/*/status; a thread that exited is no longer counted).
  module Switches
    module_function

    def of(pid)
      Dir.glob("/proc/#{pid}/task/*/status").each_with_object([0, 0]) do |file, sums|
        File.foreach(file) do |line|
          sums[0] += line.split.last.to_i if line.start_with?("voluntary_ctxt_switches")
          sums[1] += line.split.last.to_i if line.start_with?("nonvoluntary_ctxt_switches")
        end
      rescue Errno::ENOENT, Errno::ESRCH
        next
      end
    end
  end

  # One measured drain of bench/io_bound.rb: N jobs that each sleep SLEEP seconds (IoSleepJob of
  # bench/apps/io_*_app.rb), drained by one server started with `-c CONCURRENCY`, timed and measured
  # as ThroughputRun measures a blank drain; besides, the server's context switches per job (all its
  # threads), its fetch calls per job (`fetch.lua` for queue, `BRPOP` for Sidekiq, the idle waiters'
  # `BLMOVE`) and every Redis command per job (`INFO commandstats`, which counts the commands a script
  # runs as well; the benchmark's own reads left out).
  class IoRun < ThroughputRun
    APPS = {sidekiq: "io_sidekiq_app.rb", queue: "io_queue_app.rb"}.freeze
    # What the benchmark itself sends while it waits (LLEN, GET stat:processed, INFO, FLUSHALL, ...).
    OWN_COMMANDS = %w[llen get info flushall zcard exists].freeze
    # The commands a server fetches with (no other script runs while sleep jobs drain).
    FETCH_COMMANDS = %w[evalsha brpop blmove brpoplpush].freeze

    def initialize(kind, redis, jobs:, concurrency:, sleep:)
      super(kind, redis, jobs: jobs, concurrency: concurrency)
      @sleep = sleep
    end

    private

    def app_file = APPS.fetch(server_kind)

    def prepare
      @redis.client.flushall
      File.delete(@done_file) if File.exist?(@done_file)
      @jobs.times.each_slice(1000) { |s| Clients.push_bulk(server_kind, "class" => "IoSleepJob", "args" => Array.new(s.size) { [@sleep] }) }
      raise "expected #{@jobs} jobs in #{QUEUE_KEY}, found #{queue_length}" unless queue_length == @jobs
    end

    def env = super.merge("BENCH_LOG_LEVEL" => "warn", "BENCH_SIDEKIQ_METRICS" => "7")

    def snapshot
      super.merge(switches: Switches.of(@server.pid), commands: commands)
    end

    # Calls so far of each command Redis ran, but the benchmark's own.
    def commands
      @redis.client.info("commandstats").each_with_object({}) do |(name, stats), all|
        command = name.delete_prefix("cmdstat_")
        calls = stats.is_a?(Hash) ? stats["calls"] : stats[/calls=(\d+)/, 1]
        all[command] = calls.to_i unless OWN_COMMANDS.include?(command)
      end
    end

    def result(first, last, boot)
      per_job = ->(n) { n.to_f / @jobs }
      calls = last[:commands].to_h { |c, n| [c, per_job.(n - first[:commands].fetch(c, 0))] }.select { |_, n| n > 0 }
      super.merge(
        "voluntary_switches_per_job" => per_job.(last[:switches][0] - first[:switches][0]),
        "involuntary_switches_per_job" => per_job.(last[:switches][1] - first[:switches][1]),
        "fetches_per_job" => calls.slice(*FETCH_COMMANDS).values.sum,
        "redis_calls_by_command_per_job" => calls
      )
    end
  end

  # The ceiling of one configuration: `threads` bare Ruby threads looping on `sleep(sleep)`
  # (bench/lib/io_ceiling.rb), in a process of their own, for `jobs` iterations in all.
  class IoCeiling
    SCRIPT = File.expand_path("io_ceiling.rb", __dir__)

    def initialize(jobs:, concurrency:, sleep:)
      @jobs = jobs
      @concurrency = concurrency
      @sleep = sleep
    end

    def call
      out, status = Open3.capture2(RbConfig.ruby, SCRIPT, @concurrency.to_s, @sleep.to_s, @jobs.to_s)
      raise "the ceiling script failed (#{status})" unless status.success?

      m = JSON.parse(out)
      {
        "server" => "ceiling", "jobs" => @jobs, "seconds" => m["seconds"], "jobs_per_s" => @jobs / m["seconds"],
        "server_cpu_us_per_job" => m["cpu_seconds"] * 1e6 / @jobs,
        "voluntary_switches_per_job" => m["voluntary_switches"].to_f / @jobs,
        "involuntary_switches_per_job" => m["involuntary_switches"].to_f / @jobs
      }
    end
  end
end
