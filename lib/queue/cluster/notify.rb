# frozen_string_literal: true

require "socket"
require "tmpdir"
require "fileutils"

module JobQueue
  module Cluster
    # The cluster's side of systemd's `Type=notify` (sd_notify(3)), as the engine speaks it for one
    # server (ext/queue_core/src/notify.rs, supervisor.rs), for the whole group: `READY=1` once every
    # child is ready, `STOPPING=1` when a stop begins, a `STATUS=` line, and `WATCHDOG=1` while every
    # ready child pings its own.
    #
    # The children never see systemd's socket: each gets a socket of the parent's as its
    # NOTIFY_SOCKET (one per slot, in a private directory), so its engine says READY and pings the
    # watchdog exactly as a single server does, and the parent listens. Without NOTIFY_SOCKET there
    # is none of it: no socket, and children run with NOTIFY_SOCKET unset.
    class Notify
      attr_reader :watchdog

      def self.from_env(env = ENV)
        path = env["NOTIFY_SOCKET"]
        return nil if path.nil? || path.empty?

        new(path, watchdog_usec(env))
      end

      # WATCHDOG_USEC, when meant for this process (WATCHDOG_PID unset or this pid).
      def self.watchdog_usec(env)
        usec = env["WATCHDOG_USEC"]
        return nil if usec.nil?
        raise ArgumentError, "WATCHDOG_USEC=#{usec.inspect} is not a positive whole number" unless usec.match?(/\A\d+\z/) && usec.to_i.positive?

        pid = env["WATCHDOG_PID"]
        return nil if pid && pid.to_i != ::Process.pid

        usec.to_i
      end

      def initialize(path, watchdog_usec)
        @path = path
        @address = Socket.pack_sockaddr_un(path.start_with?("@") ? "\0#{path[1..]}" : path)
        @socket = Socket.new(:UNIX, :DGRAM)
        @watchdog_usec = watchdog_usec
        @watchdog = watchdog_usec && watchdog_usec / 2_000_000.0 # seconds between pings
        @dir = Dir.mktmpdir("qc-") # short: a socket path has at most 107 bytes
        @listeners = {}
        @failing = false
        check!
      end

      # A socket for slot `index` that its children use as NOTIFY_SOCKET; the same one for each
      # process the slot runs.
      def listener(index)
        @listeners[index] ||= begin
          path = File.join(@dir, "child-#{index}.sock")
          socket = Socket.new(:UNIX, :DGRAM)
          socket.bind(Socket.pack_sockaddr_un(path))
          [socket, path]
        end
      end

      # The environment a child of slot `index` is started with.
      def child_env(index, pid)
        env = {"NOTIFY_SOCKET" => listener(index).last}
        env.update("WATCHDOG_USEC" => @watchdog_usec.to_s, "WATCHDOG_PID" => pid.to_s) if @watchdog_usec
        env
      end

      # Datagrams waiting on slot `index`'s socket (each split into its lines).
      def receive(index)
        socket = listener(index).first
        messages = []
        loop do
          message = socket.recv_nonblock(4096, exception: false)
          break if message == :wait_readable || message.nil?

          messages.concat(message.split("\n"))
        end
        messages
      end

      def sockets
        @listeners.values.map(&:first)
      end

      def send(message)
        @socket.sendmsg_nonblock(message, exception: false)
        @failing = false
      rescue SystemCallError => e
        JobQueue.logger.warn("cannot tell the service manager #{message.inspect} at #{@path}: #{e.message}") unless @failing
        @failing = true
      end

      # In a forked child: its copies of the parent's sockets are closed (the parent keeps its own).
      def close_in_child
        @listeners.each_value { |socket, _| socket.close }
        @socket.close
      end

      def close
        @listeners.each_value { |socket, _| socket.close }
        @socket.close
        FileUtils.rm_rf(@dir)
      end

      private

      # A socket that cannot be reached fails at start, as a single server does, naming it.
      def check!
        unless @path.start_with?("/", "@")
          raise ArgumentError, "NOTIFY_SOCKET=#{@path.inspect} is not usable: it is neither an absolute path nor an abstract name (@name)"
        end

        @socket.connect(@address)
      rescue SystemCallError => e
        raise ArgumentError, "NOTIFY_SOCKET=#{@path.inspect} is not usable: #{e.message}"
      end
    end
  end
end
