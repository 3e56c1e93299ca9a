# frozen_string_literal: true

require_relative "context"
require_relative "job_log"
require_relative "logging"

module JobQueue
  # What surrounds a job's middleware and `perform` in a processor thread: its log lines written from
  # Ruby (JSON ones, or text ones for an app's own logger; the engine writes the default logger's),
  # the log context its own lines carry, and its worker context, restored from the job's "meta.*"
  # fields. Costs no allocation for a job without context when the engine writes the lines.
  module JobRun
    # `context`: false when the job is known to carry no worker context (Context.restore).
    def self.around(config, klass, job, queue, context = true)
      log = config.job_log
      Logging.with_job(job) do
        next Context.restore(job, context) { yield } unless log

        log.around(klass, job, queue) { Context.restore(job, context) { yield } }
      end
    end
  end
end
