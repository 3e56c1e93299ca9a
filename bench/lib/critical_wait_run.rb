# frozen_string_literal: true

require_relative "clients"
require_relative "latency_run"

module Bench
  # How long a critical job waits behind a busy default queue. `default` holds FILLERS jobs of 20 ms
  # and a server runs them with `-c 5 -q <queues>`; once every thread is busy, `jobs` critical jobs
  # are pushed one at a time, SPACING apart. Each records when it started; its wait is that minus the
  # time it was pushed (one machine, one clock). The run is void if `default` ever ran dry: it is
  # still non-empty when the last critical job has started (it only shrinks, so it was throughout).
  class CriticalWaitRun
    include LatencyRun

    KEY = "latency:critical"
    FILLERS = 2_500 # 10 s of work for 5 threads, twice what the measurement takes
    SPACING = (0.03..0.07)

    def initialize(kind, redis, queues:, jobs:, concurrency:, rng:)
      @kind = kind
      @redis = redis
      @queues = queues
      @jobs = jobs
      @concurrency = concurrency
      @rng = rng
    end

    def call
      r = @redis.client
      r.flushall
      Clients.push_bulk(@kind, "class" => "LatencyFillerJob", "args" => Array.new(FILLERS) { [] })
      server = start_server(@queues.flat_map { |q| ["-q", q] })
      begin
        server.wait_for("every thread to run fillers", interval: 0.01, timeout: TIMEOUT) do
          r.get("latency:fillers").to_i >= 2 * @concurrency
        end
        push_critical_jobs
        server.wait_for("#{@jobs} critical jobs to start", interval: 0.01, timeout: TIMEOUT) { r.llen(KEY) >= @jobs }
        fillers_left = r.llen("queue:default")
      ensure
        server.stop
      end
      raise "#{@kind} #{@queues.join(" ")}: the default queue ran dry during the measurement" if fillers_left.zero?

      summary(probes(KEY).map { |pushed, started| started - pushed }).merge("fillers_left" => fillers_left)
    end

    private

    def push_critical_jobs
      @jobs.times do
        Clients.push(@kind, "class" => PROBE, "queue" => "critical", "args" => [KEY, Time.now.to_f])
        sleep @rng.rand(SPACING) # the pushes are spaced: that is the scenario
      end
    end
  end
end
