# frozen_string_literal: true

require "socket"

module Bench
  # A Redis client that does no work of its own while it is timed: its requests are written in full
  # before the clock starts, and it waits for each reply by polling the socket, as queue's client
  # does (`busy_poll_us`). Only Redis and the network remain, so the time it measures for a request
  # is the least any client can take for it.
  #
  # A reply is complete when it has as many lines as the caller says: two for LPUSH + SADD, for the
  # push script's answer and for SCRIPT LOAD's (counting lines is the cheapest check, and the timed
  # loop must cost next to nothing). None of those replies holds a "-": one that does (an error, or
  # a nil) stops the run.
  class BareClient
    def initialize(redis)
      @socket = if RedisServer.transport == "tcp"
        URI(redis.tcp_url).then { |u| TCPSocket.new(u.host, u.port) }.tap do |s|
          s.setsockopt(Socket::IPPROTO_TCP, Socket::TCP_NODELAY, 1)
        end
      else
        UNIXSocket.new(redis.socket)
      end
      @chunk = String.new(capacity: 4096)
    end

    # A command in RESP.
    def self.command(*args)
      args.map(&:to_s).reduce(+"*#{args.size}\r\n") { |out, arg| out << "$#{arg.bytesize}\r\n" << arg << "\r\n" }
    end

    # Sends one request and returns its reply once its `lines` reply lines are in.
    def call(request, lines)
      @socket.write(request)
      reply = String.new
      loop do
        chunk = @socket.read_nonblock(4096, @chunk, exception: false)
        next if chunk == :wait_readable
        raise EOFError, "Redis closed the connection" if chunk.nil?

        reply << chunk
        next unless reply.count("\n") >= lines || reply.include?("-")
        raise "Redis answered #{reply.inspect}" if reply.include?("-")

        return reply
      end
    end

    def close
      @socket.close
    end
  end
end
