# frozen_string_literal: true

require "time"

module JobQueue
  # Structured JSON job logs, as GitLab's Sidekiq StructuredLogger writes them: one line when a job
  # starts, one when it is done or fails, each a JSON object with the job's fields and:
  #
  #   class, jid, queue, job_status ("start", "done", "fail"), message ("<class> JID-<jid>: done: 0.1 sec"),
  #   pid, enqueued_at, created_at, scheduling_latency_s (seconds from enqueued_at to the start),
  #   meta.* (the job's context), severity, time;
  #   on done and fail also duration_s (wall clock), cpu_s (this thread's CPU time) and completed_at;
  #   on fail also error_class and error_message.
  #
  # Turn on with `config.job_logs = :json`. Arguments are left out unless `config.log_arguments = true`
  # (or, when that is not set, the environment has SIDEKIQ_LOG_ARGUMENTS=1); then numeric ones are shown
  # and the others are "[FILTERED]" unless the worker lists their positions in `loggable_arguments`.
  class JobLog
    FILTERED = "[FILTERED]"
    # Logged arguments are cut to about this many bytes of JSON, the rest replaced by "...", as GitLab
    # limits them.
    ARGS_LIMIT = 10 * 1024
    # Fields of the job hash a log line leaves out: the previous attempt's error, and the arguments
    # (added back, filtered, when argument logging is on).
    LEFT_OUT = %w[args error_message error_class error_backtrace].freeze

    def initialize(config)
      @config = config
      @log_arguments = config.log_arguments?
    end

    # Logs around the block (the job's middleware and perform); re-raises what it raises.
    def around(klass, job, queue)
      start = monotonic
      cpu_start = cpu_time
      payload = base_payload(klass, job, queue)
      write(::Logger::INFO, payload.merge("job_status" => "start", "message" => "#{base_message(payload)}: start"))
      yield
      write(::Logger::INFO, finished(payload, start, cpu_start, "done"))
    rescue Shutdown
      raise
    rescue Exception => e # rubocop:disable Lint/RescueException
      write(::Logger::WARN, finished(payload, start, cpu_start, "fail").merge("error_class" => e.class.name, "error_message" => e.message)) if payload
      raise
    end

    private

    def base_payload(klass, job, queue)
      payload = {}
      job.each { |key, value| payload[key] = value unless LEFT_OUT.include?(key) }
      payload["class"] = job["wrapped"] if job["wrapped"].is_a?(String) && !job["wrapped"].empty?
      payload["queue"] = queue
      payload["args"] = filtered_args(klass, job["args"]) if @log_arguments
      payload["pid"] = ::Process.pid
      latency = scheduling_latency(job["enqueued_at"])
      payload["scheduling_latency_s"] = latency if latency
      payload
    end

    def finished(payload, start, cpu_start, status)
      duration = (monotonic - start).round(6)
      payload.merge(
        "job_status" => status,
        "message" => "#{base_message(payload)}: #{status}: #{duration} sec",
        "duration_s" => duration,
        "cpu_s" => [cpu_time - cpu_start, 0].max.round(6),
        "completed_at" => Time.now.to_f
      )
    end

    def base_message(payload)
      "#{payload["class"]} JID-#{payload["jid"]}"
    end

    def filtered_args(klass, args)
      loggable = klass.respond_to?(:loggable_arguments) ? klass.loggable_arguments : []
      limited(args.each_with_index.map { |arg, i| arg.is_a?(Numeric) || loggable.include?(i) ? arg : FILTERED })
    end

    def limited(args)
      size = 0
      args.each_with_index do |arg, i|
        size += JSON.generate(arg).bytesize + 1
        return args.first(i) << "..." if size > ARGS_LIMIT
      end
      args
    end

    # Seconds between enqueued_at (epoch seconds, or milliseconds as Sidekiq 8 writes it) and now.
    def scheduling_latency(enqueued_at)
      enqueued_at = Timestamp.seconds(enqueued_at) or return nil

      [Time.now.to_f - enqueued_at, 0].max.round(6)
    end

    # One line, written whole (Logger#<< takes the log device's lock), if the logger's level lets it.
    def write(severity, payload)
      logger = @config.logger
      return if logger.level > severity

      line = {"severity" => ::Logger::SEV_LABEL[severity], "time" => Time.now.utc.iso8601(3)}.merge(payload)
      logger << "#{JSON.generate(line)}\n"
    end

    def monotonic
      ::Process.clock_gettime(::Process::CLOCK_MONOTONIC)
    end

    def cpu_time
      ::Process.clock_gettime(::Process::CLOCK_THREAD_CPUTIME_ID)
    end

    # Formats the server's other log lines as JSON objects too, so the whole log parses line by line;
    # a line logged while a job runs has its context in `ctx` (class, jid…), as Sidekiq's JSON lines.
    class Formatter
      def call(severity, time, progname, message)
        line = {"severity" => severity, "time" => time.utc.iso8601(3), "pid" => ::Process.pid}
        line["progname"] = progname if progname
        ctx = Logging.context_hash
        line["ctx"] = ctx if ctx # the running job's (or ordered batch's), as Sidekiq's JSON formatter
        message.is_a?(Hash) ? line.merge!(message) : line["message"] = message.is_a?(Exception) ? "#{message.class}: #{message.message}" : message.to_s
        "#{JSON.generate(line)}\n"
      end
    end
  end

  # Settings of JSON job logs.
  class Configuration
    JOB_LOG_MODES = [nil, :text, :json].freeze
    TRUE_WORDS = %w[1 true yes on].freeze

    attr_reader :job_logs

    # :text (the default) writes Sidekiq's `start`/`done`/`fail` lines (see Logging); :json GitLab's
    # structured lines instead (and formats the logger's other lines as JSON); nil or false neither.
    def job_logs=(mode)
      mode = nil if mode == false
      mode = mode.to_sym if mode.is_a?(String)
      raise ArgumentError, "job_logs must be :text, :json, or nil/false for none; got #{mode.inspect}" unless JOB_LOG_MODES.include?(mode)

      @job_logs = mode
      @job_log = nil
      logger.formatter = JobLog::Formatter.new if mode == :json
    end

    # Whether JSON job logs show job arguments (filtered). Unset, SIDEKIQ_LOG_ARGUMENTS decides.
    def log_arguments=(value)
      raise ArgumentError, "log_arguments must be true, false or nil, got #{value.inspect}" unless [true, false, nil].include?(value)

      @log_arguments = value
      @job_log = nil
    end

    def log_arguments?
      return @log_arguments unless @log_arguments.nil?

      TRUE_WORDS.include?(ENV["SIDEKIQ_LOG_ARGUMENTS"].to_s.strip.downcase)
    end

    # The job log JobRun writes through, or nil when there is none to write from Ruby: logs off, or
    # text lines the engine writes itself (`engine_job_lines`, set as a server starts).
    # @api private
    def job_log
      return nil unless @job_logs
      return nil if @job_logs == :text && @engine_job_lines

      @job_log ||= @job_logs == :json ? JobLog.new(self) : Logging::TextJobLog.new(self)
    end

    # @api private
    def engine_job_lines? = @engine_job_lines

    # @api private
    def engine_job_lines=(on)
      @engine_job_lines = on
      @job_log = nil
    end
  end
end
