# frozen_string_literal: true

require "socket"
require "queue/testing/redis_server"

# For specs that need a redis-server on TCP (TLS, passwords): a free loopback port, and whether a
# server listens on it yet.
module Ports
  def free_port = JobQueue::Testing::RedisServer.free_port

  # `count` distinct free ports (each held until all are chosen, so none is handed out twice).
  def free_ports(count)
    servers = Array.new(count) { TCPServer.new("127.0.0.1", 0) }
    servers.map { |server| server.addr[1] }
  ensure
    servers&.each(&:close)
  end

  def listening?(port)
    TCPSocket.new("127.0.0.1", port).close
    true
  rescue Errno::ECONNREFUSED
    false
  end
end

RSpec.configure { |c| c.include Ports }
