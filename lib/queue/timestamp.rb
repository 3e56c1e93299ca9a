# frozen_string_literal: true

module JobQueue
  # A job's timestamps (`created_at`, `enqueued_at`, `failed_at`, `retried_at`) come in two forms:
  # float epoch seconds (Sidekiq 6.4–7.x, and this gem) and integer epoch milliseconds (Sidekiq 8).
  # Sidekiq 8's rule reads them: a Float is seconds, an Integer milliseconds. An Integer too small to
  # be milliseconds of this era (below 10**11, 1973 as milliseconds) is taken as seconds, as a
  # hand-rolled client writing `Time.now.to_i` means. The engine reads them the same way
  # (`epoch_seconds` in ext/queue_core/src/job.rs).
  module Timestamp
    MILLIS_FROM = 100_000_000_000

    module_function

    # Epoch seconds (Float) of a timestamp in either form; nil for anything but a number.
    def seconds(value)
      case value
      when Integer then value >= MILLIS_FROM ? value / 1000.0 : value.to_f
      when Float then value
      end
    end

    # The timestamp as a UTC Time (milliseconds kept exactly); nil for anything but a number.
    def time(value)
      case value
      when Integer then value >= MILLIS_FROM ? Time.at(value / 1000, value % 1000, :millisecond).utc : Time.at(value).utc
      when Float then Time.at(value).utc
      end
    end

    # Whether the job writes its timestamps as Sidekiq 8 does (integer milliseconds): the form of its
    # `created_at`, else `enqueued_at`.
    def millis?(job)
      value = job["created_at"] || job["enqueued_at"]
      value.is_a?(Integer) && value >= MILLIS_FROM
    end

    # `seconds` (epoch, Float) written in the job's own form (whole milliseconds truncated, as Sidekiq
    # 8's `clock_gettime(…, :millisecond)`).
    def for_job(job, seconds)
      millis?(job) ? (seconds * 1000).floor : seconds
    end
  end
end
