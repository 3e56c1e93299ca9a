# frozen_string_literal: true

# Sidekiq 6.4.1's side of spec/compat/lifecycle_spec.rb: the hooks of lifecycle_queue.rb.
require "sidekiq"
require_relative "lifecycle_record"

Sidekiq.configure_server do |config|
  config.redis = {url: ENV.fetch("REDIS_URL")}
  LifecycleRecord.register(config, "sidekiq")
end
