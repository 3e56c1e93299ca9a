# frozen_string_literal: true

require_relative "mix_run"
require_relative "proc_memory"
require_relative "server"

module Bench
  # One server draining `jobs` of the mix's jobs, for its memory: VmRSS and VmHWM (kB) when it takes
  # its first job, every `every` jobs (read inside the server by bench/apps/mix_work.rb as the
  # count passes), and at the end (read from outside, with /proc/<pid>/smaps_rollup and the thread
  # count). The jobs are pushed in bulk slices while it runs, so Redis holds at most ~2 slices.
  class RssRun
    SLICE = 50_000
    TIMEOUT = 1800

    # [{"jobs", "VmRSS", "VmHWM"}] as the job wrote them to `file` (bench/apps/mix_work.rb).
    def self.progress(file)
      return [] unless File.exist?(file)

      File.readlines(file).map do |line|
        count, rss, hwm = line.split.map(&:to_i)
        {"jobs" => count, "VmRSS" => rss, "VmHWM" => hwm}
      end.sort_by { |p| p["jobs"] }
    end

    # What bench/apps/mix_work.rb reads: how many jobs, where to write the count and the progress
    # (every `every` jobs), the database, the pool's size.
    def self.job_env(jobs:, done:, every:, progress:, db:, concurrency:)
      {"BENCH_N" => jobs.to_s, "BENCH_DONE" => done, "BENCH_EVERY" => every.to_s, "BENCH_PROGRESS" => progress,
       "BENCH_DB" => db, "BENCH_CONCURRENCY" => concurrency.to_s}
    end

    def initialize(kind, redis, db:, jobs:, concurrency:, every:)
      @kind = kind
      @redis = redis
      @db = db
      @jobs = jobs
      @concurrency = concurrency
      @every = every
      @done_file = File.join(redis.dir, "#{kind}-rss.done")
      @progress_file = File.join(redis.dir, "#{kind}-rss.progress")
    end

    def call
      prepare
      started = monotonic
      @server = Server.new(@kind, @redis, app: MixRun::APPS.fetch(@kind), args: ["-c", @concurrency.to_s], env: env).start
      begin
        @server.wait_for("#{@kind} to take its first job", interval: 0.001, timeout: TIMEOUT) { queue_length < @pushed }
        first = ProcMemory.status(@server.pid)
        @server.wait_for("#{@kind} to run all #{@jobs} jobs", interval: 0.01, timeout: TIMEOUT) { top_up || finished? }
        last = ProcMemory.status(@server.pid).merge("smaps_rollup" => ProcMemory.rollup(@server.pid))
      ensure
        @server.stop
      end
      verify!
      {"server" => @kind.to_s, "jobs" => @jobs, "concurrency" => @concurrency, "seconds" => monotonic - started,
       "start" => first, "progress" => self.class.progress(@progress_file), "end" => last}
    end

    private

    def prepare
      @redis.client.flushall
      [@done_file, @progress_file].each { |f| File.delete(f) if File.exist?(f) }
      @pushed = [@jobs, 2 * SLICE].min
      MixRun.push(@kind, @pushed)
    end

    # Pushes the next slice when fewer than one slice wait; false, so the wait goes on.
    def top_up
      return false if @pushed >= @jobs || queue_length >= SLICE

      count = [SLICE, @jobs - @pushed].min
      MixRun.push(@kind, count, from: @pushed)
      @pushed += count
      false
    end

    def env
      self.class.job_env(jobs: @jobs, done: @done_file, every: @every, progress: @progress_file, db: @db,
                         concurrency: @concurrency).merge("BENCH_LOG_LEVEL" => "warn", "BENCH_SIDEKIQ_METRICS" => "7")
    end

    def finished?
      return false unless File.exist?(@done_file)

      @kind == :sidekiq || @redis.client.get("stat:processed").to_i >= @jobs
    end

    def queue_length = @redis.client.llen(MixRun::QUEUE_KEY)

    def verify!
      ran = File.exist?(@done_file) ? File.read(@done_file).to_i : 0
      incrs = MixRun.increments(@redis)
      failures = @redis.client.zcard("retry") + @redis.client.zcard("dead")
      return if ran == @jobs && incrs == @jobs && failures.zero? && queue_length.zero?

      raise "#{@kind}: ran #{ran}, #{incrs} INCRs, #{failures} in retry/dead, #{queue_length} left (expected #{@jobs})\n#{@server.output}"
    end

    def monotonic = Process.clock_gettime(Process::CLOCK_MONOTONIC)
  end
end
