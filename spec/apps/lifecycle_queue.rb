# frozen_string_literal: true

# Lifecycle hooks of our server (spec/compat/lifecycle_spec.rb); lifecycle_sidekiq.rb registers the
# same ones on Sidekiq. Each hook records its event, and whether the process was in `processes` yet.
require "queue"
require_relative "lifecycle_record"

JobQueue.configure { |c| c.redis = {url: ENV["REDIS_URL"]} } if ENV["REDIS_URL"]
JobQueue.configure_server do |config|
  LifecycleRecord.register(config, "queue")
end
