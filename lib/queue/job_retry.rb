# frozen_string_literal: true

module JobQueue
  # The Ruby half of a failure: asks the worker's `sidekiq_retry_in` block for a delay, lets the engine
  # file the job (retry set, dead set, or nowhere, under Sidekiq's rules), then runs the callbacks the
  # outcome calls for: `sidekiq_retries_exhausted` and the death handlers when retries are used up
  # (with the job as filed), the death handlers alone for `retry: false`, and the error handlers for
  # every failure (with the job as it ran, as in Sidekiq).
  #
  # As in Sidekiq 7.3, a job past its last retry or its `retry_for` window is exhausted without asking
  # `sidekiq_retry_in`, and `sidekiq_retries_exhausted` returning `:discard` keeps the job out of the
  # dead set and skips the death handlers.
  class JobRetry
    DEFAULT_MAX_RETRIES = 25

    # `engine`: the engine of the shard the job ran on (its dead set is there).
    def initialize(config, engine = config.main_engine)
      @config = config
      @engine = engine
    end

    # `jobstr`: the job's JSON as it was fetched, for the error handlers (Sidekiq's context key).
    def failed(fetcher, klass, job, jobstr, error)
      retry_in = give_up?(klass, job) ? :kill : retry_in(klass, job, error)
      begin
        fate, filed = fetcher.fail(
          error.class.name, message_of(error), backtrace_of(error), retry_in, worker_retry(klass)
        )
      rescue ConnectionError, RedisError
        # Not filed (the job goes back to its queue once Redis answers); the job's own error is
        # still reported.
        report(error, context: "Job raised exception", job: job, jobstr: jobstr)
        raise
      end
      filed_job = filed ? JSON.parse(filed) : job
      case fate
      when :dead, :exhausted
        exhausted(klass, filed_job, error, fate == :dead ? filed : nil)
      when :no_retry
        notify_death(filed_job, error)
      end
      # As Sidekiq's processor: the error handlers get the job as it ran (the hash the middleware saw,
      # its "retry_count" that of this attempt), not as filed: sentry-sidekiq's
      # `report_after_job_retries` tells the last attempt by it.
      report(error, context: "Job raised exception", job: job, jobstr: jobstr)
    end

    private

    # The worker's own `retry` option, which (as in Sidekiq) applies to a job pushed without a
    # "retry" field. nil when the class is unknown.
    def worker_retry(klass)
      return nil unless klass.respond_to?(:get_sidekiq_options)

      option = klass.get_sidekiq_options["retry"]
      option if option == true || option == false || option.is_a?(Integer)
    end

    # Whether this failure exhausts the job before `sidekiq_retry_in` is asked, as Sidekiq decides it:
    # its retries used up (the engine files it as exhausted anyway; the block is not called), or its
    # `retry_for` seconds since the first failure (`failed_at`, seconds or Sidekiq 8 milliseconds) past.
    def give_up?(klass, job)
      count = job["retry_count"].is_a?(Integer) ? job["retry_count"] + 1 : 0
      policy = job["retry"].nil? ? worker_retry(klass) : job["retry"]
      count >= (policy.is_a?(Integer) ? policy : DEFAULT_MAX_RETRIES) || (count.positive? && window_passed?(job))
    end

    def window_passed?(job)
      window = job["retry_for"]
      first = Timestamp.seconds(job["failed_at"])
      window.is_a?(Numeric) && first ? first + window < Time.now.to_f : false
    end

    # nil (Sidekiq's formula), Integer seconds, :kill or :discard.
    def retry_in(klass, job, error)
      block = klass.respond_to?(:sidekiq_retry_in_block) && klass.sidekiq_retry_in_block
      return nil unless block

      answer = block.call(job["retry_count"].is_a?(Integer) ? job["retry_count"] + 1 : 0, error, job)
      case answer
      when :kill, :discard, nil then answer
      when Numeric then answer.to_i
      else
        raise ArgumentError, "sidekiq_retry_in returned #{answer.inspect}; expected seconds, :kill or :discard"
      end
    rescue => e
      report(e, context: "sidekiq_retry_in of #{klass} failed; using the default delay")
      nil
    end

    # `filed`: the job's JSON as the engine put it in the dead set (nil when it skipped the dead set).
    def exhausted(klass, job, error, filed)
      block = klass.respond_to?(:sidekiq_retries_exhausted_block) && klass.sidekiq_retries_exhausted_block
      answer = begin
        block&.call(job, error)
      rescue => e
        report(e, context: "Error calling retries_exhausted", job: job)
      end
      return discard(job, filed) if answer == :discard

      notify_death(job, error)
    end

    # The block said :discard (Sidekiq 7.1+): the job leaves the dead set the engine just put it in,
    # and no death handler runs.
    def discard(job, filed)
      @engine.api_set_delete("dead", filed) if filed
    rescue ConnectionError, RedisError => e
      report(e, context: "sidekiq_retries_exhausted returned :discard; removing the job from the dead set failed", job: job)
    end

    def notify_death(job, error)
      @config.death_handlers.each do |handler|
        handler.call(job, error)
      rescue => e
        report(e, context: "Error calling death handler", job: job)
      end
    end

    def report(error, context)
      @config.report_error(error, context)
    end

    def backtrace_of(error)
      Array(error.backtrace).map(&:to_s)
    rescue
      []
    end

    def message_of(error)
      error.message.to_s.dup.force_encoding(Encoding::UTF_8).scrub
    rescue
      "!!! ERROR MESSAGE THREW AN ERROR !!!"
    end
  end
end
