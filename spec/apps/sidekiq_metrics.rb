# frozen_string_literal: true

# App for spec/api/sidekiq_metrics_spec.rb: workers of known duration and one that fails, with
# config.sidekiq_metrics from SIDEKIQ_METRICS ("7", "8" or "false").
require_relative "basic"

JobQueue.config.sidekiq_metrics = (ENV.fetch("SIDEKIQ_METRICS", "7") == "false") ? false : Integer(ENV.fetch("SIDEKIQ_METRICS", "7"))

class SkMetricsSleepWorker
  include JobQueue::Worker
  sidekiq_options queue: "sk_metrics"

  def perform(seconds)
    sleep(seconds)
    Record.redis.rpush("ran:sk_metrics", "sleep")
  end
end

class SkMetricsFailingWorker
  include JobQueue::Worker
  sidekiq_options queue: "sk_metrics", retry: false

  def perform
    Record.redis.rpush("ran:sk_metrics", "fail")
    raise ArgumentError, "boom"
  end
end
