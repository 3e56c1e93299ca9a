# frozen_string_literal: true

require "json"
require "rbconfig"
require_relative "mix_run"
require_relative "rss_run"

module Bench
  # The mix's memory floor (bench/lib/mix_floor.rb): bare Ruby threads running `jobs` of the mix's
  # jobs with no server, in a process of their own, measured as RssRun measures a server. With
  # `settings` (queue's memory settings: {arena_max:, gc_growth:, trim_interval:}) it runs with the
  # ones a queue server applies; without, as Ruby and glibc start by default.
  class FloorRssRun
    SCRIPT = File.expand_path("mix_floor.rb", __dir__)
    TIMEOUT = 1800

    def initialize(redis, db:, jobs:, concurrency:, every:, settings: nil)
      @redis = redis
      @db = db
      @jobs = jobs
      @concurrency = concurrency
      @every = every
      @settings = settings
      name = settings ? "floor-settings" : "floor"
      @status_file, @done_file, @progress_file = %w[status done progress].map { |f| File.join(redis.dir, "#{name}-rss.#{f}") }
    end

    def call
      @redis.client.flushall
      [@status_file, @done_file, @progress_file].each { |f| File.delete(f) if File.exist?(f) }
      log = File.join(@redis.dir, "#{File.basename(@status_file, ".status")}.log")
      pid = Process.spawn(env, RbConfig.ruby, SCRIPT, @status_file, chdir: @redis.dir, out: log, err: [:child, :out])
      wait(pid, log)
      measured = JSON.parse(File.read(@status_file))
      verify!(log)
      {"server" => "floor", "settings" => @settings, "jobs" => @jobs, "concurrency" => @concurrency,
       "seconds" => measured["seconds"], "gc_count" => measured["gc_count"], "start" => measured["start"],
       "progress" => RssRun.progress(@progress_file), "end" => measured["end"]}
    end

    private

    def env
      base = RssRun.job_env(jobs: @jobs, done: @done_file, every: @every, progress: @progress_file, db: @db,
                            concurrency: @concurrency).merge("REDIS_URL" => @redis.url)
      return base unless @settings

      base.merge("MALLOC_ARENA_MAX" => @settings[:arena_max]&.to_s, "FLOOR_MALLOC_GC" => @settings[:gc_growth]&.to_s,
                 "FLOOR_MALLOC_TRIM" => @settings[:trim_interval]&.to_s).compact
    end

    def wait(pid, log)
      waiter = Process.detach(pid)
      unless waiter.join(TIMEOUT)
        Process.kill(:KILL, pid)
        waiter.join
        raise "the floor did not finish #{@jobs} jobs in #{TIMEOUT} s\n#{File.read(log)}"
      end
      raise "the floor failed (#{waiter.value})\n#{File.read(log)}" unless waiter.value.success?
    end

    def verify!(log)
      ran = File.exist?(@done_file) ? File.read(@done_file).to_i : 0
      incrs = MixRun.increments(@redis)
      return if ran == @jobs && incrs == @jobs

      raise "floor: ran #{ran}, #{incrs} INCRs (expected #{@jobs})\n#{File.read(log)}"
    end
  end
end
