# frozen_string_literal: true

module JobQueue
  module Ordered
    # An ordered batch's `start` and `done`/`fail` lines, in the family of a plain job's (Logging): the
    # batch's context in the prefix, `elapsed=` on the last, at INFO. Written as a plain job's are: by
    # the engine with the default logger (Native.log_event), through the logger's `info` otherwise.
    #
    #   … tid=2c7f class=OrderSyncWorker ids=42,43 count=2 INFO: start
    #   … tid=2c7f class=OrderSyncWorker ids=42,43 count=2 elapsed=0.004 INFO: done
    #
    # With `job_logs = :json`, JSON lines with `job_status` (start, done, fail), `duration_s` and the
    # context in `ctx`; with `job_logs = nil`, or the logger above INFO, none. Runs inside
    # Logging.with_batch, which gives the lines (and the worker's own) their context.
    module BatchLog
      module_function

      EVENTS = {"start" => 0, "done" => 1, "fail" => 2}.freeze

      def around(config)
        logger = config.logger
        return yield unless config.job_logs && logger.info?

        start = ::Process.clock_gettime(::Process::CLOCK_MONOTONIC, :nanosecond)
        line(config, logger, "start", nil)
        yield
        line(config, logger, "done", start)
      rescue Shutdown
        raise
      rescue Exception # rubocop:disable Lint/RescueException
        line(config, logger, "fail", start) if start
        raise
      end

      def line(config, logger, status, start)
        elapsed = ::Process.clock_gettime(::Process::CLOCK_MONOTONIC, :nanosecond) - start if start
        # With the default logger the engine formats the line and writes it with the job lines (or
        # with the next line Ruby writes), as it does a plain job's: no Ruby formatter call.
        return Native.log_event(Logging.batch_prefix, EVENTS.fetch(status), elapsed) if config.job_logs == :text && config.engine_job_lines?

        Thread.current[Logging::ELAPSED] = (elapsed / 1e9).round(3) if elapsed
        case config.job_logs
        when :json then json_line(logger, status)
        else logger.info(logger.formatter.is_a?(Logging::Pretty) ? status : "#{Logging.context.strip} #{status}")
        end
      ensure
        Thread.current[Logging::ELAPSED] = nil
      end

      # As JobLog's lines for plain jobs: class, ids and count beside job_status and message.
      def json_line(logger, status)
        ctx = Logging.context_hash
        line = ctx.slice("class", "ids", "count")
        line["job_status"] = status
        line["message"] = "#{ctx["class"]} ids=#{ctx["ids"].join(",")}: #{status}"
        line["duration_s"] = ctx["elapsed"] if ctx.key?("elapsed")
        status == "fail" ? logger.warn(line) : logger.info(line)
      end
    end
  end
end
