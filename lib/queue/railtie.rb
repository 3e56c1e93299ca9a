# frozen_string_literal: true

require "rails/railtie"
require_relative "rails_integration/config_file"
require_relative "../active_job/queue_adapters/queue_adapter" if defined?(::ActiveJob)

module JobQueue
  # Rails integration, loaded by `require "queue"` in a Rails app: config/queue.yml's Redis settings,
  # the ActiveJob adapter (`config.active_job.queue_adapter = :queue`), and in `bundle exec queue` the
  # app's reloader around every job, Rails.logger's lines in the server's log, and a warning when the
  # database pool is smaller than the concurrency. The CLI loads config/environment.rb and eager-loads
  # the app before the server starts; in any process, listing ordered workers eager-loads it first.
  class Railtie < ::Rails::Railtie
    initializer "queue.config_file" do |app|
      RailsIntegration::ConfigFile.apply(app.root.join("config", "queue.yml").to_s, ::Rails.env)
    end

    # Whatever lists ordered workers (JobQueue::Ordered, the dashboard, `queue ordered`) eager-loads
    # the app first, so that what autoloading has loaded so far does not matter.
    config.after_initialize do |app|
      require_relative "rails_integration/eager_loader"
      JobQueue::Ordered.loader = RailsIntegration::EagerLoader.new(app)
    end

    config.after_initialize do |app|
      next unless JobQueue.server?

      require_relative "rails_integration/server"
      RailsIntegration::Server.setup(app)
    end
  end
end
