# frozen_string_literal: true

module JobQueue
  # Expiring jobs, as Sidekiq Pro has them: a worker's `sidekiq_options expires_in: 3600` (or
  # `set(expires_in: 1.hour)` for one push) says that the job must *start* within that many seconds
  # of when it was to run (its push, or its `at` when scheduled). The client turns the relative
  # `expires_in` into an absolute `expires_at` (epoch seconds) in the job; a server that takes the job
  # after that time drops it unrun: acknowledged, logged `expired`, counted in `Stats#expired` and the
  # `queue_jobs_expired_total` metric. A job that started in time runs as long as it needs.
  module Expiry
    module_function

    # Whether `value` is a usable `expires_in`: a positive, finite number of seconds (an
    # ActiveSupport::Duration is one).
    def valid?(value)
      value.is_a?(Numeric) && !value.is_a?(Complex) && value.to_f.positive? && value.to_f.finite?
    end

    # Replaces the job's "expires_in" with "expires_at", counted from "at" when it is scheduled, else
    # from "created_at". Returns the job.
    def stamp!(job)
      ttl = job.delete("expires_in") or return job
      job["expires_at"] = (job["at"] || Timestamp.seconds(job["created_at"])).to_f + ttl.to_f
      job
    end

    # Whether the job carries an "expires_at" that has passed (the clock is read only when it does).
    def expired?(job, now = nil)
      at = job["expires_at"]
      at.is_a?(Numeric) && at < (now || Time.now.to_f)
    end
  end
end
