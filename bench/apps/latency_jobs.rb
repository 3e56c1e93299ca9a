# frozen_string_literal: true

# The jobs of the latency benchmark (bench/latency.rb), the same for both servers: each app includes
# its server's worker module and one of these. They record through the redis gem, on one connection
# per thread, in the benchmark's Redis (REDIS_URL).
require "json"
require "redis"

module LatencyJobs
  def self.redis
    Thread.current[:latency_redis] ||= Redis.new(url: ENV.fetch("REDIS_URL"))
  end

  # Keeps a thread busy for 20 ms, and counts its runs in `latency:fillers` (so the benchmark can
  # tell every thread is busy before it measures).
  module Filler
    def perform
      LatencyJobs.redis.incr("latency:fillers")
      sleep 0.02
    end
  end

  # Records the moment it started (this machine's clock, read first thing), next to the reference
  # time the benchmark gave it (when it pushed the job, or when the job was due), in the list `key`.
  module Probe
    def perform(key, reference)
      started = Time.now.to_f
      LatencyJobs.redis.rpush(key, JSON.generate([reference, started]))
    end
  end
end
