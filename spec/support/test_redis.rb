# frozen_string_literal: true

require "queue/testing/redis_server"

# The suite's private redis-server (a unix socket in a temp dir, and a free TCP port on 127.0.0.1 for
# the examples that need TCP; never the machine's own Redis, never port 6379), shared by every example
# and flushed before each.
module TestRedis
  class << self
    def start
      return if @server

      @server = JobQueue::Testing::RedisServer.new(prefix: "queue-test-redis", tcp: true).start
      at_exit { stop }
    end

    def stop
      @server&.stop
      @server = nil
      @client = nil
    end

    def dir
      @server.dir
    end

    def pid
      @server.pid
    end

    def socket
      @server.socket
    end

    def url
      @server.url
    end

    def tcp_url
      @server.tcp_url
    end

    # A redis gem client, for tests to inspect and arrange data.
    def client
      @client ||= Redis.new(path: socket)
    end

    def flush
      client.flushall
    end
  end
end
