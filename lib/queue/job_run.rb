# frozen_string_literal: true

require_relative "context"
require_relative "job_log"

module JobQueue
  # What surrounds a job's middleware and `perform` in a processor thread: its JSON log lines (when on)
  # and its context, restored from the job's "meta.*" fields. Costs no allocation for a job without
  # context when logs are off.
  module JobRun
    def self.around(config, klass, job, queue)
      log = config.job_log
      return Context.restore(job) { yield } unless log

      log.around(klass, job, queue) { Context.restore(job) { yield } }
    end
  end
end
