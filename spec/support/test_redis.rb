# frozen_string_literal: true

require "tmpdir"
require "socket"

# A private redis-server for the test run: a unix socket in a temp dir, no persistence. Never the
# machine's own Redis, never port 6379.
module TestRedis
  class << self
    attr_reader :dir, :pid

    def start
      return if @pid

      @dir = Dir.mktmpdir("queue-test-redis")
      @pid = Process.spawn(
        "redis-server", "--port", "0", "--unixsocket", socket, "--unixsocketperm", "700",
        "--save", "", "--appendonly", "no", "--dir", @dir,
        out: File.join(@dir, "redis.log"), err: [:child, :out]
      )
      wait_for_socket
      at_exit { stop }
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

    # A redis gem client, for tests to inspect and arrange data.
    def client
      @client ||= Redis.new(path: socket)
    end

    def flush
      client.flushall
    end

    private

    def wait_for_socket
      deadline = Time.now + 10
      loop do
        begin
          UNIXSocket.open(socket) do |s|
            s.write("PING\r\n")
            return if s.gets&.start_with?("+PONG")
          end
        rescue Errno::ENOENT, Errno::ECONNREFUSED
          nil
        end
        raise "redis-server did not start: #{File.read(File.join(@dir, "redis.log"))}" if Time.now > deadline

        sleep 0.02
      end
    end
  end
end
