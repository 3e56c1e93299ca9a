# frozen_string_literal: true

# App for spec/api/retry_spec.rb and spec/api/scheduler_spec.rb: workers that fail in each of the ways
# Sidekiq's retry rules distinguish. Every run, exhaustion, death and error is recorded in Redis.
require_relative "basic"

module ApiRetry
  class Boom < StandardError; end

  def self.record(list, entry)
    Record.redis.rpush(list, JSON.generate(entry))
  end

  # Counts the runs of a job and records each; returns the count.
  def self.run(worker, args)
    count = Record.redis.incr("api:runs:#{worker.jid}")
    record("api:runs", "class" => worker.class.name, "jid" => worker.jid, "args" => args, "run" => count)
    count
  end

  def self.summary(job, error)
    {"jid" => job["jid"], "class" => job["class"], "retry_count" => job["retry_count"],
     "error_class" => job["error_class"], "error_message" => job["error_message"],
     "exception" => error.class.name, "message" => error.message}
  end
end

JobQueue.configure_server do |config|
  config.death_handlers << ->(job, error) { ApiRetry.record("api:deaths", ApiRetry.summary(job, error)) }
  # Sidekiq 7's three-argument handlers, and one taking any arguments, get the configuration third.
  config.error_handlers << ->(error, context, cfg) { ApiRetry.record("api:errors3", "jid" => context.dig(:job, "jid"), "config" => cfg.class.name) }
  config.error_handlers << proc { |*args| ApiRetry.record("api:errors_any", "jid" => args[1].dig(:job, "jid"), "arity" => args.size) }
  # This one runs last for every failure: once it has recorded, the failure is fully handled.
  config.error_handlers << lambda do |error, context|
    job = context[:job] || {}
    ApiRetry.record("api:errors", "error" => error.class.name, "jid" => job["jid"], "retry_count" => job["retry_count"], "error_message" => job["error_message"],
      "context" => context.keys.sort.map(&:to_s), "jobstr_jid" => context[:jobstr] && JSON.parse(context[:jobstr])["jid"])
  end
end

# Fails its first run, retried after `sidekiq_retry_in` seconds (the first argument).
class ApiFlakyWorker
  include JobQueue::Worker
  sidekiq_options retry: 3
  sidekiq_retry_in { |count, _error, job| job["args"].first }

  def perform(delay)
    raise ApiRetry::Boom, "first run fails" if ApiRetry.run(self, [delay]) == 1
  end
end

# Always fails; `sidekiq_retry_in` answers its first argument (seconds, "kill" or "discard").
class ApiFailingWorker
  include JobQueue::Worker
  sidekiq_options retry: 5, backtrace: 2
  sidekiq_retry_in { |_count, _error, job| answer = job["args"].first; answer.is_a?(String) ? answer.to_sym : answer }
  sidekiq_retries_exhausted { |job, error| ApiRetry.record("api:exhausted", ApiRetry.summary(job, error)) }

  def perform(*args)
    ApiRetry.run(self, args)
    raise ApiRetry::Boom, "always fails"
  end
end

# No retries: the first failure exhausts the job.
class ApiNoRetriesWorker < ApiFailingWorker
  sidekiq_options retry: 0
  sidekiq_retry_in { nil }
end

# `retry: false`: the failure is dropped.
class ApiNoRetryWorker < ApiFailingWorker
  sidekiq_options retry: false
end

# Exhausted without a place in the dead set.
class ApiNoMorgueWorker < ApiFailingWorker
  sidekiq_options retry: 0, dead: false
  sidekiq_retry_in { nil }
end

# Retries go to another queue.
class ApiRetryQueueWorker < ApiFailingWorker
  sidekiq_options retry_queue: "api_slow"
end

# Runs once, recording its run (for scheduled jobs).
class ApiScheduledWorker
  include JobQueue::Worker

  def perform(*args)
    ApiRetry.run(self, args)
  end
end

# Retried for `retry_for` seconds after its first failure (Sidekiq 7.1+), then exhausted.
class ApiRetryForWorker < ApiFailingWorker
  sidekiq_options retry: 10, retry_for: 60
  sidekiq_retry_in { 1000 }
end

# `sidekiq_retries_exhausted` answers :discard (Sidekiq 7.1+): no dead set, no death handlers.
class ApiDiscardingWorker < ApiFailingWorker
  sidekiq_options retry: 0
  sidekiq_retries_exhausted do |job, error|
    ApiRetry.record("api:exhausted", ApiRetry.summary(job, error))
    :discard
  end
end
