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
  # 100 ms (at once when Ruby writes a line to stdout, and on shutdown), so a job's lines stay in order
  # at a fraction of a Ruby `Logger` call's cost. A logger of the app's own gets the same lines through `logger.info`.
  #
  # Lines logged while a job runs carry its context (`class=… jid=…`, `bid`, `tags`; JobLog::Formatter's
  # `ctx`), and while an ordered batch runs the batch's (`class=… ids=… count=…`, Ordered::BatchLog).
  module Logging
    # Sidekiq's `Pretty` formatter: time, pid, the thread's tid, the running job's context, then the
    # message.
    class Pretty < ::Logger::Formatter
      # `Time#iso8601(3)` for a UTC time, from C (`iso8601` is Ruby code, several µs a line).
      TIME = "%Y-%m-%dT%H:%M:%S.%LZ"

      def call(severity, time, _progname, message)
        text = message.is_a?(Exception) ? "#{message.message} (#{message.class})" : message
        "#{time.utc.strftime(TIME)} pid=#{::Process.pid} tid=#{Logging.tid}#{Logging.context} #{severity}: #{text}\n"
      end
    end

    # An ordered batch's log context: its worker and ids (the keys of the batch `perform` gets),
    # turned into the Hash and the text lines show only when a line is written (with the logger above
    # INFO most batches write none).
    class BatchContext
      def initialize(worker, batch)
        @worker = worker
        @batch = batch
      end

      def to_h
        @to_h ||= {"class" => @worker.to_s, "ids" => shown_ids, "count" => @batch.size}.freeze
      end

      def text
        @text ||= " class=#{@worker} ids=#{shown_ids.join(",")} count=#{@batch.size}"
      end

      def shown_ids
        @batch.each_key.first(BATCH_IDS_SHOWN)
      end

      # The line's whole context, pid and tid first, for the engine to write (Native.log_event).
      def prefix
        @prefix ||= " pid=#{::Process.pid} tid=#{Logging.tid}#{text}"
      end
    end

    # Prepended to the IO the engine writes its job lines to (stdout) while it writes them: what Ruby
    # writes there goes into the engine's sink instead of Ruby's own buffer, and out at once with the
    # job lines queued before it. So every line on that descriptor keeps the order it was written in,
    # whoever writes it: the server's logger, a logger an app took before the server started,
    # Rails.logger logging to stdout, a job's `puts`.
    module SinkWrites
      def write(*objects)
        text = objects.size == 1 ? objects.first.to_s : objects.join
        Native.log_write(text)
        Native.log_flush
        text.bytesize
      end

      def flush
        Native.log_flush
        super
      end
    end

    # The running job's hash, while it runs: lines logged meanwhile carry its class and jid, as
    # Sidekiq's job context does. BATCH is an ordered batch's context, while it runs. ELAPSED is added
    # for a `done`/`fail` line written from Ruby.
    CONTEXT = :job_queue_log_job
    BATCH = :job_queue_log_batch
    ELAPSED = :job_queue_log_elapsed
    # The most ids of an ordered batch its lines name (`count` says how many it has).
    BATCH_IDS_SHOWN = 20

    module_function

    # Sidekiq's thread id: base-36 of the thread's object id xor the pid.
    def tid
      Thread.current[:job_queue_tid] ||= (Thread.current.object_id ^ ::Process.pid).to_s(36)
    end

    # The running job's Hash, nil outside a job. A job the binding runs itself (Fetcher#run) has its
    # fetcher as the context instead, which builds the Hash from the job's JSON the first time a line
    # asks for it; the Hash then stays the context until the job ends.
    def running_job
      job = Thread.current[CONTEXT]
      return job if job.nil? || job.is_a?(Hash)

      Thread.current[CONTEXT] = job.running_job
    end

    # " class=… jid=…" (with bid, tags and elapsed when present) for the running job, " class=…
    # ids=… count=…" for a running ordered batch; "" outside one.
    def context
      job = running_job
      elapsed = Thread.current[ELAPSED]
      unless job
        batch = Thread.current[BATCH] or return ""
        return elapsed ? "#{batch.text} elapsed=#{elapsed}" : batch.text
      end

      text = +" class=#{job["display_class"] || job["wrapped"] || job["class"]} jid=#{job["jid"]}"
      text << " bid=#{job["bid"]}" if job.key?("bid")
      text << " tags=#{Array(job["tags"]).join(",")}" if job.key?("tags")
      text << " elapsed=#{elapsed}" if elapsed
      text
    end

    # The same context as a Hash (the JSON formatter's `ctx`, as Sidekiq's); nil outside a job.
    def context_hash
      job = running_job
      ctx = job ? job_context(job) : Thread.current[BATCH]&.to_h&.dup
      return nil unless ctx

      elapsed = Thread.current[ELAPSED]
      ctx["elapsed"] = elapsed if elapsed
      ctx
    end

    # " pid=… tid=… class=… ids=… count=…" of the ordered batch running on this thread.
    def batch_prefix
      Thread.current[BATCH].prefix
    end

    # Whether a job or an ordered batch runs on this thread.
    def in_context?
      !(Thread.current[CONTEXT] || Thread.current[BATCH]).nil?
    end

    def job_context(job)
      ctx = {"class" => job["display_class"] || job["wrapped"] || job["class"], "jid" => job["jid"]}
      ctx["bid"] = job["bid"] if job.key?("bid")
      ctx["tags"] = Array(job["tags"]) if job.key?("tags")
      ctx
    end

    # Runs the block with `job` as the log context.
    def with_job(job)
      previous = Thread.current[CONTEXT]
      Thread.current[CONTEXT] = job
      yield
    ensure
      Thread.current[CONTEXT] = previous
    end

    # Runs the block with an ordered batch of `worker` (`batch`: its payloads by id) as the log
    # context.
    def with_batch(worker, batch)
      previous = Thread.current[BATCH]
      Thread.current[BATCH] = BatchContext.new(worker, batch)
      yield
    ensure
      Thread.current[BATCH] = previous
    end

    def default_logger(io = $stdout)
      logger = ::Logger.new(io, level: ::Logger::INFO, progname: "queue")
      logger.formatter = Pretty.new
      logger
    end

    # Called as a server starts: with the default logger, has the engine write the job lines, and
    # routes what Ruby writes to stdout through the same sink (SinkWrites); returns whether the engine
    # writes them (else JobRun writes them through the logger).
    def start_server_lines(config)
      engine_lines = config.job_logs == :text && config.default_logger?
      on = engine_lines && config.logger.info?
      fd = $stdout.fileno
      if on
        $stdout.flush # what Ruby buffered goes out before the engine writes to the same descriptor
        [$stdout, STDOUT].uniq.each { |io| route(io, fd) }
        at_exit { Native.log_flush }
      end
      Native.job_lines(on, fd)
      engine_lines
    end

    def route(io, fd)
      return unless io.respond_to?(:fileno) && io.fileno == fd && !io.singleton_class.include?(SinkWrites)

      io.flush
      io.singleton_class.prepend(SinkWrites)
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
