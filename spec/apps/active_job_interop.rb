# frozen_string_literal: true

# ActiveJob without Rails, on the adapter ACTIVE_JOB_ADAPTER names: "sidekiq" (Rails' own adapter and
# the real Sidekiq 6.4.1) or "queue" (ours). Loaded by both servers and by the processes that enqueue,
# in spec/rails/active_job_interop_spec.rb. Jobs record their runs in Redis (compat_record.rb).
adapter = ENV.fetch("ACTIVE_JOB_ADAPTER")
if adapter == "sidekiq"
  require "sidekiq"
  Sidekiq.configure_client { |config| config.redis = {url: ENV.fetch("REDIS_URL")} }
  Sidekiq.configure_server do |config|
    config.redis = {url: ENV.fetch("REDIS_URL")}
    config.options[:poll_interval_average] = 1 # scheduled jobs within about a second
  end
  require "active_job"
else
  $LOAD_PATH.unshift(File.expand_path("../../lib", __dir__))
  require "active_job"
  require "active_job/queue_adapters/queue_adapter"
end
require_relative "compat_record"

ActiveJob::Base.queue_adapter = adapter.to_sym
ActiveJob::Base.logger = Logger.new(nil)

class InteropJob < ActiveJob::Base
  queue_as :interop

  def perform(*args)
    CompatRecord.redis.rpush("interop:ran", JSON.generate(
      "runner" => defined?(::JobQueue::Worker) ? "queue" : "sidekiq", "wrapper" => wrapper,
      "job_id" => job_id, "provider_job_id" => provider_job_id,
      "args" => args, "executions" => executions
    ))
  end

  private

  # Which JobWrapper ran the job: Rails' own (a Sidekiq::Worker) or our stand-in.
  def wrapper
    wrapper = ActiveJob::QueueAdapters::SidekiqAdapter::JobWrapper
    defined?(::Sidekiq::Worker) && wrapper.include?(::Sidekiq::Worker) ? "rails" : "ours"
  end
end

# Fails its first attempt; retry_on enqueues the next one through the running server's adapter.
class InteropFlakyJob < InteropJob
  class Flake < StandardError; end

  retry_on Flake, wait: 0, attempts: 2

  def perform(*args)
    super
    raise Flake, "first attempt" if executions == 1
  end
end
