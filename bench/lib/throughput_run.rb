# frozen_string_literal: true

require_relative "cpu"
require_relative "server"

module Bench
  # One measured drain: N blank jobs already in `queue:default`, one server process started with
  # `-c CONCURRENCY`, timed from the moment it takes its first job until every job has run (and, for
  # queue, been acknowledged).
  #
  # Start: the first time LLEN queue:default drops below N (polled every millisecond), which leaves
  # the server's boot (loading Ruby, the gems and the app) out of the time and CPU figures.
  # End: the N-th blank job has finished (bench/apps/blank_counter.rb writes a file), and for queue
  # also `stat:processed` = N, which its engine writes in each thread's next fetch call, after the
  # acknowledgements that thread wrote on the same connection. Sidekiq's BasicFetch has nothing to acknowledge: a job is gone from Redis when
  # BRPOP returns it. Sidekiq keeps its processed count in memory until its 5 s heartbeat or exit, so
  # it is checked (= N) after the server stops, as queue's is.
  class ThroughputRun
    # :queue_logs is queue with its per-job log lines on (INFO, as Sidekiq logs by default); the
    # others run at WARN. :queue_nosk is queue with Sidekiq's Metrics page data off
    # (`sidekiq_metrics = false`; the others write it, the default 7).
    SERVERS = {sidekiq: :sidekiq, queue: :queue, queue_logs: :queue, queue_nosk: :queue}.freeze
    LOG_LEVELS = {queue_logs: "info"}.freeze
    SIDEKIQ_METRICS = {queue_nosk: "false"}.freeze
    APP_FILES = {sidekiq: "sidekiq_app.rb", queue: "queue_app.rb", queue_logs: "queue_app.rb", queue_nosk: "queue_app.rb"}.freeze
    QUEUE_KEY = "queue:default"
    TIMEOUT = 600

    def initialize(kind, redis, jobs:, concurrency:)
      @kind = kind
      @redis = redis
      @jobs = jobs
      @concurrency = concurrency
      @done_file = File.join(redis.dir, "#{kind}.done")
    end

    # Returns the measurements as a Hash.
    def call
      prepare
      spawned = monotonic
      @server = Server.new(server_kind, @redis, app: app_file, args: ["-c", @concurrency.to_s], env: env).start
      begin
        @server.wait_for("#{@kind} to take its first job", interval: 0.001, timeout: TIMEOUT) { queue_length < @jobs }
        first = snapshot
        @server.wait_for("#{@kind} to run all #{@jobs} jobs", interval: 0.002, timeout: TIMEOUT) { finished? }
        last = snapshot
      ensure
        @server.stop
      end
      verify!
      result(first, last, first[:at] - spawned)
    end

    private

    # The server process (:sidekiq or :queue) and its app under bench/apps.
    def server_kind = SERVERS.fetch(@kind)

    def app_file = APP_FILES.fetch(@kind)

    def prepare
      @redis.client.flushall
      File.delete(@done_file) if File.exist?(@done_file)
      Clients.push_blank_jobs(server_kind, @jobs)
      raise "expected #{@jobs} jobs in #{QUEUE_KEY}, found #{queue_length}" unless queue_length == @jobs
    end

    def env
      {"BENCH_N" => @jobs.to_s, "BENCH_DONE" => @done_file, "BENCH_LOG_LEVEL" => LOG_LEVELS.fetch(@kind, "warn"),
       "BENCH_SIDEKIQ_METRICS" => SIDEKIQ_METRICS.fetch(@kind, "7")}
    end

    def finished?
      return false unless File.exist?(@done_file)

      server_kind == :sidekiq || @redis.client.get("stat:processed").to_i >= @jobs
    end

    def queue_length
      @redis.client.llen(QUEUE_KEY)
    end

    # CPU counters and the clock at one instant.
    def snapshot
      {
        at: monotonic,
        server: Cpu.process_seconds(@server.pid),
        redis: @redis.cpu_seconds,
        machine: Cpu.machine_seconds.first,
        bench: Cpu.self_seconds
      }
    end

    def result(first, last, boot)
      seconds = last[:at] - first[:at]
      delta = ->(key) { last[key] - first[key] }
      per_job = ->(key) { delta.(key) * 1e6 / @jobs }
      others = delta.(:machine) - delta.(:server) - delta.(:redis) - delta.(:bench)
      {
        "server" => @kind.to_s,
        "jobs" => @jobs,
        "seconds" => seconds,
        "jobs_per_s" => @jobs / seconds,
        "server_cpu_us_per_job" => per_job.(:server),
        "redis_cpu_us_per_job" => per_job.(:redis),
        "server_cores" => delta.(:server) / seconds,
        "redis_cores" => delta.(:redis) / seconds,
        "other_processes_cores" => [others, 0].max / seconds,
        "boot_seconds" => boot
      }
    end

    # Every job ran exactly once and none failed.
    def verify!
      r = @redis.client
      ran = File.exist?(@done_file) ? File.read(@done_file).to_i : 0
      processed = r.get("stat:processed").to_i
      failed = r.get("stat:failed").to_i
      left = queue_length
      failures = r.zcard("retry") + r.zcard("dead")
      return if ran == @jobs && processed == @jobs && failed.zero? && left.zero? && failures.zero?

      raise "#{@kind}: ran #{ran}, stat:processed #{processed}, stat:failed #{failed}, #{left} left in the queue, " \
        "#{failures} in retry/dead (expected #{@jobs} run and processed)\n#{@server.output}"
    end

    def monotonic
      Process.clock_gettime(Process::CLOCK_MONOTONIC)
    end
  end
end
