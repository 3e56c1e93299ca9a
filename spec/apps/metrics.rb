# frozen_string_literal: true

# App for spec/metrics/metrics_spec.rb: ApplicationWorkers that succeed, fail, take a while, or are
# deduplicated, each on its own queue (named after the class).
require_relative "basic"

class MetricsOkWorker
  include JobQueue::ApplicationWorker
  deduplicate :until_executing
  idempotent!

  def perform(_n) = nil
end

class MetricsFailingWorker
  include JobQueue::ApplicationWorker
  sidekiq_options retry: false

  def perform(reason)
    raise ArgumentError, reason
  end
end

class MetricsSlowWorker
  include JobQueue::ApplicationWorker

  def perform(seconds)
    sleep(seconds)
  end
end
