# frozen_string_literal: true

require_relative "boot"
require "rails"
require "active_record/railtie"
require "active_job/railtie"

Bundler.require(*Rails.groups)

module QueueRailsApp
  class Application < Rails::Application
    config.load_defaults 6.1
    config.cache_classes = true
    config.eager_load = true
    config.secret_key_base = "queue-rails-app-test-only"
    config.logger = ActiveSupport::Logger.new(ENV["RAILS_LOG_PATH"] || $stdout)
    config.log_level = :warn
    config.active_job.queue_adapter = :queue
  end
end
