# frozen_string_literal: true

require "tmpdir"
require "socket"
require "fileutils"

module Bench
  # The benchmark's own redis-server: a unix socket in a temp dir, no TCP port (never 6379), no
  # persistence. Started and stopped by pid, so it never touches another Redis on the machine.
  class RedisServer
    attr_reader :dir, :pid

    def start
      @dir = Dir.mktmpdir("queue-bench-redis")
      @pid = Process.spawn(
        "redis-server", "--port", "0", "--unixsocket", socket, "--unixsocketperm", "700",
        "--save", "", "--appendonly", "no", "--dir", @dir,
        out: File.join(@dir, "redis.log"), err: [:child, :out]
      )
      wait_for_socket
      self
    end

    def stop
      return unless @pid

      Process.kill("TERM", @pid)
      Process.wait(@pid)
    rescue Errno::ESRCH, Errno::ECHILD
      nil
    ensure
      @pid = nil
      FileUtils.rm_rf(@dir) if @dir
    end

    def socket
      File.join(@dir, "redis.sock")
    end

    def url
      "unix://#{socket}"
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

    private

    def wait_for_socket
      deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 10
      loop do
        return if pong?
        raise "redis-server did not start: #{File.read(File.join(@dir, "redis.log"))}" if Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline

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
