# frozen_string_literal: true

require "queue/testing/redis_server"

module Bench
  # The benchmark's own redis-server (see JobQueue::Testing::RedisServer), with the reads the
  # benchmarks need. The servers and clients under test reach it over TCP on 127.0.0.1, as production
  # Redis is reached, or over its unix socket with TRANSPORT=unix; the benchmark's own reads always
  # use the socket.
  class RedisServer < JobQueue::Testing::RedisServer
    TRANSPORTS = %w[unix tcp].freeze

    def self.transport
      ENV.fetch("TRANSPORT", "tcp").tap do |t|
        raise ArgumentError, "TRANSPORT must be one of #{TRANSPORTS.join(", ")}, not #{t.inspect}" unless TRANSPORTS.include?(t)
      end
    end

    def initialize
      super(prefix: "queue-bench-redis", tcp: self.class.transport == "tcp")
    end

    # What the servers and clients under test dial.
    def url
      self.class.transport == "tcp" ? tcp_url : super
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
