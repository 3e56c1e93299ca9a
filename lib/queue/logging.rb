# frozen_string_literal: true

require "logger"
require "time"

module JobQueue
  # Log lines in Sidekiq 6.4.1's shape, and its per-job lines.
  #
  #   2026-11-23T11:45:00.123Z pid=4242 tid=1x9k INFO: queue 0.1.0 started as host:4242:ab12: ...
  #   2026-11-23T11:45:00.130Z pid=4242 tid=2c7f class=HardWorker jid=4f3c… INFO: start
  #   2026-11-23T11:45:00.142Z pid=4242 tid=2c7f class=HardWorker jid=4f3c… elapsed=0.012 INFO: done
  #
  # A server writes a `start` line as each job starts and a `done` or `fail` line as it ends
  # (`config.job_logs = :text`, the default; `:json` for GitLab's structured lines; nil for none), at
  # INFO, so `logger.level = Logger::WARN` silences them as it does Sidekiq's. With the default logger
  # the engine writes them: recorded by the engine, formatted and written by a writer thread within
  # 100 ms (at once when the logger writes a line, and on shutdown), so a job's lines stay in order
  # at a fraction of a Ruby `Logger` call's cost. A logger of the app's own gets the same lines through `logger.info`.
  module Logging
    # Sidekiq's `Pretty` formatter: time, pid, the thread's tid, the running job's context, then the
    # message.
    class Pretty < ::Logger::Formatter
      def call(severity, time, _progname, message)
        text = message.is_a?(Exception) ? "#{message.message} (#{message.class})" : message
        "#{time.utc.iso8601(3)} pid=#{::Process.pid} tid=#{Logging.tid}#{Logging.context} #{severity}: #{text}\n"
      end
    end

    # The logger device that writes into the engine's sink (shared with the engine's job lines). A
    # line logged from Ruby is written out at once, with the job lines queued before it, as a
    # synchronous logger would write it; only the engine's own job lines wait for the writer thread.
    class Device
      def write(line)
        Native.log_write(line.to_s)
        Native.log_flush
      end

      def flush
        Native.log_flush
      end
      alias_method :close, :flush
      alias_method :reopen, :flush
    end

    # The running job's hash, while it runs: lines logged meanwhile carry its class and jid, as
    # Sidekiq's job context does. ELAPSED is added for a fallback `done`/`fail` line.
    CONTEXT = :job_queue_log_job
    ELAPSED = :job_queue_log_elapsed

    module_function

    # Sidekiq's thread id: base-36 of the thread's object id xor the pid.
    def tid
      Thread.current[:job_queue_tid] ||= (Thread.current.object_id ^ ::Process.pid).to_s(36)
    end

    # " class=… jid=…" (with bid, tags and elapsed when present) for the running job; "" outside one.
    def context
      job = Thread.current[CONTEXT] or return ""

      text = +" class=#{job["display_class"] || job["wrapped"] || job["class"]} jid=#{job["jid"]}"
      text << " bid=#{job["bid"]}" if job.key?("bid")
      text << " tags=#{Array(job["tags"]).join(",")}" if job.key?("tags")
      elapsed = Thread.current[ELAPSED]
      text << " elapsed=#{elapsed}" if elapsed
      text
    end

    # Runs the block with `job` as the log context.
    def with_job(job)
      previous = Thread.current[CONTEXT]
      Thread.current[CONTEXT] = job
      yield
    ensure
      Thread.current[CONTEXT] = previous
    end

    def default_logger(io = $stdout)
      logger = ::Logger.new(io, level: ::Logger::INFO, progname: "queue")
      logger.formatter = Pretty.new
      logger
    end

    # Called as a server starts: with the default logger, moves it onto the engine's sink and has the
    # engine write the job lines; returns whether it does (else JobRun writes them through the logger).
    def start_server_lines(config)
      engine_lines = config.job_logs == :text && config.default_logger?
      if engine_lines
        $stdout.flush # what Ruby buffered goes out before the engine writes to the same descriptor
        logger = config.logger
        config.swap_default_logger(::Logger.new(Device.new, level: logger.level, progname: logger.progname, formatter: logger.formatter))
        at_exit { Native.log_flush }
      end
      Native.job_lines(engine_lines && config.logger.info?, $stdout.fileno)
      engine_lines
    end

    # A server's last words: everything buffered is written out.
    def flush
      Native.log_flush
    end

    # The job lines for a logger of the app's own (the engine writes them for the default logger).
    # Its formatter shows the context if it is Pretty; any other gets the context in the message.
    class TextJobLog
      def initialize(config)
        @logger = config.logger
        @in_message = !@logger.formatter.is_a?(Pretty)
      end

      def around(_klass, job, _queue)
        return yield unless @logger.info?

        start = ::Process.clock_gettime(::Process::CLOCK_MONOTONIC)
        line("start")
        yield
        finish(start, "done")
      rescue Shutdown
        raise
      rescue Exception # rubocop:disable Lint/RescueException
        finish(start, "fail") if start
        raise
      end

      private

      def finish(start, message)
        Thread.current[ELAPSED] = (::Process.clock_gettime(::Process::CLOCK_MONOTONIC) - start).round(3)
        line(message)
      ensure
        Thread.current[ELAPSED] = nil
      end

      def line(message)
        @logger.info(@in_message ? "#{Logging.context.strip} #{message}" : message)
      end
    end
  end
end
