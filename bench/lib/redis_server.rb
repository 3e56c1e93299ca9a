# frozen_string_literal: true

require "queue/testing/redis_server"

module Bench
  # The benchmark's own redis-server (see JobQueue::Testing::RedisServer), with the reads the
  # benchmarks need.
  class RedisServer < JobQueue::Testing::RedisServer
    def initialize
      super(prefix: "queue-bench-redis")
    end

    # A redis gem client for the benchmark's own reads (flush, lengths, stats, INFO).
    def client
      @client ||= Redis.new(path: socket)
    end

    # Seconds of CPU the redis-server process has used (user + system, all its threads).
    def cpu_seconds
      info = client.info("cpu")
      info.fetch("used_cpu_sys").to_f + info.fetch("used_cpu_user").to_f
    end

    def version
      client.info("server").fetch("redis_version")
    end
  end
end
