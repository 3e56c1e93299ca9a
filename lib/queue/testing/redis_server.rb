# frozen_string_literal: true

require "tmpdir"
require "socket"
require "fileutils"

module JobQueue
  module Testing
    # A private redis-server for tests, benchmarks and demos: a unix socket in a temp dir, no TCP port
    # unless asked for one (then a free port on 127.0.0.1, so never another Redis on the machine), no
    # persistence unless asked. Started and stopped by pid.
    #
    #   redis = JobQueue::Testing::RedisServer.new.start
    #   JobQueue.configure { |c| c.redis = {url: redis.url} }
    #   ...
    #   redis.stop
    class RedisServer
      attr_reader :dir, :pid

      # A free port of 127.0.0.1 (free when asked: taken again only by a race).
      def self.free_port
        server = TCPServer.new("127.0.0.1", 0)
        server.addr[1]
      ensure
        server&.close
      end

      # `args`: extra redis-server arguments, e.g. ["--appendonly", "yes"]. `tcp: true` also listens on
      # a free port of 127.0.0.1 (#tcp_url).
      def initialize(args: [], prefix: "queue-redis", tcp: false)
        @args = args
        @prefix = prefix
        @port = tcp ? self.class.free_port : 0
      end

      def start
        @dir ||= Dir.mktmpdir(@prefix)
        @pid = ::Process.spawn(
          "redis-server", "--port", @port.to_s, "--bind", "127.0.0.1", "--unixsocket", socket, "--unixsocketperm", "700",
          "--save", "", "--appendonly", "no", "--dir", @dir, *@args,
          out: log, err: [:child, :out]
        )
        wait_for_socket
        self
      end

      # Stops the server; `keep_dir: true` keeps its files for a restart on the same socket.
      def stop(keep_dir: false)
        return unless @pid

        ::Process.kill("TERM", @pid)
        ::Process.wait(@pid)
      rescue Errno::ESRCH, Errno::ECHILD
        nil
      ensure
        @pid = nil
        FileUtils.rm_rf(@dir) if @dir && !keep_dir
      end

      def socket
        File.join(@dir, "redis.sock")
      end

      def url
        "unix://#{socket}"
      end

      # The same server over TCP, when started with `tcp: true`.
      def tcp_url
        raise ArgumentError, "this redis-server listens on a unix socket only" if @port.zero?

        "redis://127.0.0.1:#{@port}"
      end

      def log
        File.join(@dir, "redis.log")
      end

      private

      def wait_for_socket
        deadline = ::Process.clock_gettime(::Process::CLOCK_MONOTONIC) + 10
        until pong?
          raise "redis-server did not start: #{File.read(log)}" if ::Process.clock_gettime(::Process::CLOCK_MONOTONIC) > deadline

          sleep 0.02
        end
      end

      def pong?
        UNIXSocket.open(socket) do |s|
          s.write("PING\r\n")
          s.gets&.start_with?("+PONG")
        end
      rescue Errno::ENOENT, Errno::ECONNREFUSED
        false
      end
    end
  end
end
