# frozen_string_literal: true

require "fileutils"
require_relative "clients"
require_relative "cpu"
require_relative "server"

module Bench
  # One measured drain of bench/cluster.rb: N jobs (blank, or sleeping 1 ms) already in
  # `queue:default`, drained by one or two server processes with `-c CONCURRENCY` each: queue
  # (`queue`, or `queue cluster -n 2`: one parent forking two servers) or Sidekiq 6.4.1 (one or two
  # `sidekiq` processes started side by side).
  #
  # Timed as ThroughputRun times one: from the first job taken (LLEN below N) until every job has run,
  # which the processes' counts say (bench/apps/cluster_counter.rb: each writes its own, the sum is
  # checked), and for queue also `stat:processed` = N (acknowledged). CPU: every process of the
  # server (a cluster's parent and children) from /proc, Redis's from `INFO cpu`, and the rest of the
  # machine's busy time as "other processes".
  class ClusterRun
    APP_FILES = {sidekiq: "cluster_sidekiq_app.rb", queue: "cluster_queue_app.rb"}.freeze
    CLASSES = {[:sidekiq, :blank] => "SidekiqBlankJob", [:sidekiq, :sleep] => "SidekiqSleepJob",
               [:queue, :blank] => "QueueBlankJob", [:queue, :sleep] => "QueueSleepJob"}.freeze
    QUEUE_KEY = "queue:default"
    TIMEOUT = 600

    # server: :sidekiq or :queue; job: :blank or :sleep; processes: 1 or 2.
    def initialize(server, job, processes, redis, jobs:, concurrency:)
      @server = server
      @job = job
      @processes = processes
      @redis = redis
      @jobs = jobs
      @concurrency = concurrency
      @done_dir = File.join(redis.dir, "done-#{server}-#{job}-#{processes}")
    end

    def call
      prepare
      spawned = monotonic
      @servers = start_servers
      begin
        wait_for("to take its first job", 0.001) { queue_length < @jobs }
        first = snapshot
        wait_for("to run all #{@jobs} jobs", 0.002) { finished? }
        last = snapshot
      ensure
        @servers.each(&:stop)
      end
      verify!
      result(first, last, first[:at] - spawned)
    end

    private

    def prepare
      @redis.client.flushall
      FileUtils.rm_rf(@done_dir)
      FileUtils.mkdir_p(@done_dir)
      klass = CLASSES.fetch([@server, @job])
      @jobs.times.each_slice(1000) { |slice| Clients.push_bulk(@server, "class" => klass, "args" => Array.new(slice.size) { [] }) }
      raise "expected #{@jobs} jobs in #{QUEUE_KEY}, found #{queue_length}" unless queue_length == @jobs
    end

    # Two Sidekiqs are two processes started together; two queue servers are one `queue cluster`.
    def start_servers
      env = {"BENCH_DONE_DIR" => @done_dir, "BENCH_LOG_LEVEL" => "warn"}
      args = ["-c", @concurrency.to_s]
      app = APP_FILES.fetch(@server)
      if @server == :queue && @processes > 1
        [Server.new(:queue, @redis, app: app, args: ["cluster", *args, "-n", @processes.to_s, "default"], env: env).start]
      else
        Array.new(@processes) { Server.new(@server, @redis, app: app, args: args, env: env).start }
      end
    end

    def wait_for(what, interval)
      @servers.first.wait_for("#{@server} x#{@processes} #{what}", interval: interval, timeout: TIMEOUT) do
        raise "#{@server}: a server exited early\n#{@servers.map(&:output).join}" if @servers.any?(&:exited?)

        yield
      end
    end

    def ran
      Dir.glob(File.join(@done_dir, "*")).sum { |file| File.read(file).to_i }
    end

    def finished?
      ran >= @jobs && (@server == :sidekiq || @redis.client.get("stat:processed").to_i >= @jobs)
    end

    def queue_length
      @redis.client.llen(QUEUE_KEY)
    end

    # Every process of the servers: each one started, and a cluster parent's children.
    def pids
      @servers.flat_map do |server|
        children = File.read("/proc/#{server.pid}/task/#{server.pid}/children").split.map(&:to_i)
        [server.pid, *children]
      end
    end

    def snapshot
      processes = pids
      {
        at: monotonic,
        pids: processes,
        server: processes.sum { |pid| Cpu.process_seconds(pid) },
        redis: @redis.cpu_seconds,
        machine: Cpu.machine_seconds.first,
        bench: Cpu.self_seconds
      }
    end

    def result(first, last, boot)
      raise "#{@server}: its processes changed during the drain (#{first[:pids]} → #{last[:pids]})" unless first[:pids] == last[:pids]

      seconds = last[:at] - first[:at]
      delta = ->(key) { last[key] - first[key] }
      per_job = ->(key) { delta.(key) * 1e6 / @jobs }
      others = delta.(:machine) - delta.(:server) - delta.(:redis) - delta.(:bench)
      {
        "server" => @server.to_s, "job" => @job.to_s, "processes" => @processes, "jobs" => @jobs,
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

    # Every job ran exactly once and none failed (Sidekiq's counts reach Redis as it stops).
    def verify!
      r = @redis.client
      processed = r.get("stat:processed").to_i
      failed = r.get("stat:failed").to_i
      left = queue_length
      failures = r.zcard("retry") + r.zcard("dead")
      count = ran
      return if count == @jobs && processed == @jobs && failed.zero? && left.zero? && failures.zero?

      raise "#{@server} x#{@processes}: ran #{count}, stat:processed #{processed}, stat:failed #{failed}, #{left} left, " \
        "#{failures} in retry/dead (expected #{@jobs})\n#{@servers.map(&:output).join}"
    end

    def monotonic
      Process.clock_gettime(Process::CLOCK_MONOTONIC)
    end
  end
end
