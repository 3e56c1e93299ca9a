# frozen_string_literal: true

require "rbconfig"

module Bench
  # A server under benchmark, as a subprocess: the real Sidekiq (`ruby -S sidekiq`) or queue
  # (`ruby exe/queue`), loading an app from bench/apps, pointed at the benchmark's Redis by REDIS_URL.
  # Its output goes to a log file in the Redis's temp dir, which every error quotes.
  class Server
    ROOT = File.expand_path("../..", __dir__)
    APPS = File.expand_path("../apps", __dir__)
    COMMANDS = {
      sidekiq: [RbConfig.ruby, "-S", "sidekiq"],
      queue: [RbConfig.ruby, File.join(ROOT, "exe", "queue")]
    }.freeze
    STOP_TIMEOUT = 60

    attr_reader :kind, :pid, :log

    # kind: :sidekiq or :queue. app: a file name under bench/apps. args: CLI flags (-c, -q).
    def initialize(kind, redis, app:, args: [], env: {})
      @kind = kind
      @command = [*COMMANDS.fetch(kind), *args, "-r", File.join(APPS, app)]
      @env = {"REDIS_URL" => redis.url}.merge(env)
      @dir = redis.dir
      @log = File.join(redis.dir, "#{kind}-#{Process.clock_gettime(Process::CLOCK_MONOTONIC, :nanosecond)}.log")
    end

    def start
      @pid = Process.spawn(@env, *@command, chdir: @dir, out: @log, err: [:child, :out])
      self
    end

    # Polls the block every `interval` seconds until it returns a truthy value, which it returns.
    # Raises, with the server's log, if the server exits first or `timeout` seconds pass.
    def wait_for(what, interval:, timeout: 600)
      deadline = monotonic + timeout
      loop do
        result = yield
        return result if result
        raise "#{what}: #{@kind} exited early\n#{output}" if exited?
        raise "#{what}: timed out after #{timeout}s\n#{output}" if monotonic > deadline

        sleep interval
      end
    end

    def exited?
      @status ||= Process.waitpid2(@pid, Process::WNOHANG)&.last
      !@status.nil?
    end

    # TERM, and KILL if it has not exited within STOP_TIMEOUT seconds.
    def stop
      return if exited?

      Process.kill("TERM", @pid)
      deadline = monotonic + STOP_TIMEOUT
      sleep 0.05 until exited? || monotonic > deadline
      return if exited?

      Process.kill("KILL", @pid)
      Process.wait(@pid)
    end

    def output
      File.exist?(@log) ? File.read(@log) : ""
    end

    private

    def monotonic
      Process.clock_gettime(Process::CLOCK_MONOTONIC)
    end
  end
end
