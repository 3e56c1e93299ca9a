# frozen_string_literal: true

require "socket"

module Bench
  # A Redis client that does no work of its own while it is timed: its requests are written in full
  # before the clock starts, and it waits for each reply by polling the socket, as queue's client
  # does (`busy_poll_us`). Only Redis and the network remain, so the time it measures for a request
  # is the least any client can take for it.
  #
  # Every reply it is timed on must be simple: integers, statuses or an empty bulk string, each line
  # a reply or (for `$0`) half of one. An error reply stops the run.
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

    # Sends each request and waits for its `lines` reply lines; returns the mean µs a request.
    def time(requests, lines)
      GC.start
      t0 = Process.clock_gettime(Process::CLOCK_MONOTONIC)
      requests.each { |request| call(request, lines) }
      (Process.clock_gettime(Process::CLOCK_MONOTONIC) - t0) * 1e6 / requests.size
    end

    # Sends one request and returns its reply, read whole (for the untimed setup too).
    def call(request, lines)
      @socket.write(request)
      reply = +""
      loop do
        chunk = @socket.read_nonblock(4096, @chunk, exception: false)
        next if chunk == :wait_readable
        raise EOFError, "Redis closed the connection" if chunk.nil?

        reply << chunk
        raise "Redis answered #{reply.lines.first.chomp}" if reply.start_with?("-")
        return reply if reply.count("\n") >= lines
      end
    end

    def close
      @socket.close
    end
  end
end
