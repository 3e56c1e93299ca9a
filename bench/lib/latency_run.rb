# frozen_string_literal: true

require "json"
require_relative "report"
require_relative "server"

module Bench
  # What the latency measurements share: the servers' apps (bench/apps/latency_*), the probe jobs'
  # records and the figures made of them.
  module LatencyRun
    APPS = {sidekiq: "latency_sidekiq_app.rb", queue: "latency_queue_app.rb"}.freeze
    PROBE = "LatencyProbeJob"
    TIMEOUT = 120

    private

    def start_server(args)
      Server.new(@kind, @redis, app: APPS.fetch(@kind), args: ["-c", @concurrency.to_s, *args]).start
    end

    # [reference, started] of every probe job that recorded itself in `key`, in seconds since the epoch.
    def probes(key)
      @redis.client.lrange(key, 0, -1).map { |raw| JSON.parse(raw) }
    end

    # p50, p99, max and min of delays given in seconds, in milliseconds.
    def summary(delays)
      ms = delays.map { |d| d * 1e3 }
      {"samples" => ms.size, "p50_ms" => Report.percentile(ms, 50), "p99_ms" => Report.percentile(ms, 99),
       "max_ms" => ms.max, "min_ms" => ms.min}
    end

    def monotonic
      Process.clock_gettime(Process::CLOCK_MONOTONIC)
    end
  end
end
