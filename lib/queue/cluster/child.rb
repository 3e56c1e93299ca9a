# frozen_string_literal: true

module JobQueue
  module Cluster
    # One slot of the cluster: its index (in the process tag, "app-0"), its queues, and the process
    # running in it now, with what the supervisor tracks about that process.
    class Child
      attr_reader :index, :queues, :pid, :started_at
      # Consecutive deaths, for the backoff; when to start the next process, if waiting.
      attr_accessor :failures, :restart_at
      # The process said READY=1 (under systemd), and when it last pinged its watchdog.
      attr_accessor :ready, :pinged_at
      # Stopping for the memory limit: when to KILL it if it has not exited.
      attr_accessor :replacing, :kill_at

      def initialize(index, queues)
        @index = index
        @queues = queues
        @failures = 0
      end

      def queue_names
        @queues.map(&:first)
      end

      def running?
        !@pid.nil?
      end

      def started(pid, now)
        @pid = pid
        @started_at = now
        @restart_at = nil
        @ready = false
        @pinged_at = nil
        @replacing = false
        @kill_at = nil
      end

      # The process is gone (reaped); returns how long it ran.
      def exited(now)
        lived = now - @started_at
        @pid = nil
        @ready = false
        @kill_at = nil
        lived
      end

      # Sends a signal to the process, if it still runs.
      def signal(name)
        ::Process.kill(name, @pid) if @pid
      rescue Errno::ESRCH
        nil
      end

      # "child 1 (pid 4242, queues mailers,default)", for log lines.
      def to_s
        "child #{@index} (#{@pid ? "pid #{@pid}, " : ""}queues #{queue_names.join(",")})"
      end
    end
  end
end
