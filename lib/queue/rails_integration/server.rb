# frozen_string_literal: true

module JobQueue
  module RailsIntegration
    # What `bundle exec queue` adds in a Rails app, once it is initialized (Railtie), and what an
    # embedded server adds when it starts in one (embedded.rb).
    module Server
      # Server middleware: the job, and the middleware after it, inside the app's reloader (which
      # runs the executor), so ActiveRecord connections go back to the pool after each job and code
      # reloads in development, as Sidekiq's Rails reloader does.
      class Reloader
        def initialize(app)
          @app = app
        end

        def call(_worker, _job, _queue, &block)
          @app.reloader.wrap(&block)
        end
      end

      # A Logger that hands each line to whatever JobQueue.logger is when it is written (an app may
      # set its own after Rails has booted).
      class LoggerProxy < ::Logger
        def initialize
          super(nil)
        end

        def add(severity, message = nil, progname = nil, &block)
          JobQueue.logger.add(severity, message, progname, &block)
        end
      end

      module_function

      # `embedded:` (JobQueue.configure_embed, in a Rails process such as Puma's) leaves Rails.logger
      # as the app set it: the host's log is its own. Once per configuration.
      def setup(app, config = JobQueue.config, embedded: false)
        return if config.server_middleware.exists?(Reloader)

        config.server_middleware.prepend(Reloader, app)
        config.ordered_server_middlewares.unshift(->(_worker, _batch, &block) { app.reloader.wrap(&block) })
        broadcast_rails_logger unless embedded
        report_to_rails_error(config)
        warn_small_pool(config)
      end

      # Rails 7's error reporter (`Rails.error`) hears of every failed job, as with Sidekiq 7; Rails
      # 6.1 (the suite's, Debian's) has none, so there this does nothing.
      def report_to_rails_error(config)
        return unless ::Rails.respond_to?(:error) && ::Rails.error.respond_to?(:report)

        config.error_handlers << ->(error, context) { ::Rails.error.report(error, handled: false, context: context) }
      end

      # Rails.logger's lines (a job's `Rails.logger.info`) also reach the server's log, with the job's
      # context, unless Rails already logs to stdout; as Sidekiq 6.4's Railtie does.
      def broadcast_rails_logger
        logger = ::Rails.logger or return
        return if ::ActiveSupport::Logger.logger_outputs_to?(logger, $stdout)

        logger.extend(::ActiveSupport::Logger.broadcast(LoggerProxy.new))
      end

      def warn_small_pool(config)
        return unless defined?(::ActiveRecord::Base)

        pool = ::ActiveRecord::Base.connection_pool.size
        return if pool >= config.concurrency

        config.logger.warn(
          "database pool (#{pool}) is smaller than concurrency (#{config.concurrency}): jobs will wait for " \
          "connections and may fail with ActiveRecord::ConnectionTimeoutError; set pool: to at least " \
          "#{config.concurrency} in config/database.yml"
        )
      rescue ::ActiveRecord::ActiveRecordError => e
        config.logger.warn("could not check the database pool size: #{e.class}: #{e.message}")
      end
    end
  end
end
