# frozen_string_literal: true

module JobQueue
  # An app that keeps the sidekiq gem (6.4) and runs `bundle exec queue`. The gem runs an app's
  # `Sidekiq.configure_server` blocks only when `Sidekiq.server?`, which it answers with
  # `defined?(Sidekiq::CLI)`: false here, so every block would be skipped in silence. In `queue`'s
  # server this makes `Sidekiq.server?` true, so the blocks run against the gem's Sidekiq as they do
  # under `bundle exec sidekiq`, and hands JobQueue's server what they set:
  #
  # - server middleware (`config.server_middleware { |chain| ... }`): Sidekiq's chain runs, in its
  #   order, inside JobQueue's (ServerChain, its last entry);
  # - `config.error_handlers`, `config.death_handlers`, `config.on(event) { }`: added to JobQueue.config
  #   (but the gem's own error logger: queue logs job errors itself);
  # - `config.redis = {...}`: JobQueue.config.redis too (the gem's Sidekiq.redis keeps its own pool).
  #
  # What queue's server cannot honour stops the start with an Unsupported error that names it and
  # what to use instead (exe/queue prints it and exits 1): a ConnectionPool as `config.redis`, and a
  # `Sidekiq.options` key a block changes that only Sidekiq's server would read (concurrency, queues…).
  module SidekiqGem
    # A Sidekiq setting queue's server cannot honour.
    class Unsupported < ArgumentError; end

    LIB = File.expand_path("..", __dir__)
    # Sidekiq.options keys a block may change: what the gem itself reads (the client's argument
    # check), and what is handed to JobQueue.config above.
    PASSED = %i[on_complex_arguments error_handlers death_handlers lifecycle_events].freeze
    # Accepted, not used: one elected process moves due jobs a few ms after their time.
    UNUSED = %i[average_scheduled_poll_interval poll_interval_average].freeze
    # Where queue takes the settings of Sidekiq's server.
    INSTEAD = {
      concurrency: "-c N, or :concurrency: in config/queue.yml",
      queues: "-q NAME[,WEIGHT], or :queues: in config/queue.yml",
      timeout: "-t SECONDS, or :timeout: in config/queue.yml",
      labels: ":labels: in config/queue.yml, or JobQueue.configure { |c| c.labels = [...] }",
      tag: "-g TAG, or :tag: in config/queue.yml",
      strict: "weights in -q/:queues: (strict order unless a queue has a weight, as in Sidekiq)",
      max_retries: "sidekiq_options retry: N, or Sidekiq.default_job_options = {\"retry\" => N}",
      fetch: "nothing: queue's fetch is reliable already (jobs go back to their queue after a crash), and it puts back " \
        "what gitlab-sidekiq-fetcher's processes left (README, \"The gems around Sidekiq\")",
      job_logger: "JobQueue.config.job_logs (:text, :json or nil)",
      reloader: "nothing: `queue` wraps each job in Rails.application.reloader itself"
    }.freeze
    # Sidekiq.options keys set to JobQueue's values before each block, for blocks that read them
    # (a database pool sized to `Sidekiq.options[:concurrency]`).
    SYNCED = %i[concurrency timeout queues labels tag].freeze

    # Prepended to the gem's `Sidekiq` singleton in queue's server.
    module ServerMode
      def server?
        true
      end

      def configure_server(&block)
        return if SidekiqGem.own_rails_block?(block)

        SidekiqGem.sync(options)
        before = SidekiqGem.snapshot(options)
        yield self
        SidekiqGem.check!(before, options)
      end

      def redis=(settings)
        SidekiqGem.redis!(settings)
        super
      end
    end

    # JobQueue's server middleware entry for Sidekiq's chain.
    class ServerChain
      def call(worker, job, queue, &block)
        ::Sidekiq.server_middleware.invoke(worker, job, queue, &block)
      end
    end

    class << self
      # Boots the app (the block) with the gem's Sidekiq in server mode from the moment it is defined,
      # before any of the app's blocks: a `module Sidekiq` opened outside this gem (the shim is inside
      # it) is the gem's.
      def watch
        if defined?(::Sidekiq)
          install if gem_loaded?
          return yield
        end

        trace = TracePoint.new(:class) do |tp|
          next unless tp.self.name == "Sidekiq"

          install unless tp.path.start_with?("#{LIB}/")
          trace.disable
        end
        trace.enable
        begin
          yield
        ensure
          trace.disable
        end
      end

      # After the app booted: hands JobQueue's server what the app gave the gem's Sidekiq, and says so.
      def adopt(config)
        return unless installed?

        config.server_middleware { |chain| chain.add(ServerChain) }
        errors = adopt_handlers(config.error_handlers, ::Sidekiq.error_handlers.reject { |h| gem_logger?(h) })
        deaths = adopt_handlers(config.death_handlers, ::Sidekiq.death_handlers)
        hooks = ::Sidekiq.options[:lifecycle_events].sum { |event, blocks| blocks.each { |b| config.on(event, &b) }.size }
        middleware = ::Sidekiq.server_middleware.map { |entry| entry.klass.name }
        config.logger.info("sidekiq #{::Sidekiq::VERSION} gem: Sidekiq.configure_server honoured: server middleware " \
          "#{middleware.empty? ? "none" : middleware.join(", ")}; #{errors} error handler(s), #{deaths} death handler(s), " \
          "#{hooks} lifecycle hook(s)")
      end

      def installed?
        @installed == true
      end

      # @api private (ServerMode): a block of the gem's own Railtie (sidekiq/rails.rb), which sets
      # Sidekiq's reloader and sends Rails.logger's lines to Sidekiq.logger. queue's Railtie does both
      # for its own server (rails_integration/server.rb); run twice, each Rails.logger line would be
      # logged twice.
      def own_rails_block?(block)
        file = block&.source_location&.first or return false
        version = Object.const_source_location("Sidekiq::VERSION")&.first or return false
        file == File.join(File.dirname(version), "rails.rb")
      end

      # @api private (ServerMode)
      def sync(options)
        config = JobQueue.config
        values = {concurrency: config.concurrency, timeout: config.timeout, queues: config.queue_names, labels: Array(config.labels), tag: config.tag}
        SYNCED.each { |key| options[key] = values.fetch(key) }
      end

      # @api private (ServerMode)
      def snapshot(options)
        # Values a block could change in place (`options[:queues] << "low"`) are compared as copies.
        options.reject { |key, _| PASSED.include?(key) }.transform_values { |v| v.is_a?(Array) || v.is_a?(Hash) || v.is_a?(String) ? v.dup : v }
      end

      # @api private (ServerMode): refuses a change only Sidekiq's server would have read.
      def check!(before, options)
        options.each do |key, value|
          next if PASSED.include?(key) || (before.key?(key) && before[key] == value)
          next JobQueue.config.warn_once("Sidekiq.options[#{key.inspect}] is not used: queue's scheduler moves due jobs a few ms after their time") if UNUSED.include?(key)

          instead = INSTEAD.fetch(key, "see README, \"Moving from Sidekiq\"")
          raise Unsupported, "Sidekiq.configure_server sets Sidekiq.options[#{key.inspect}] = #{value.inspect}, which only " \
            "Sidekiq's server reads; `queue` does not. Remove it from the block and use: #{instead}"
        end
      end

      # @api private (ServerMode)
      def redis!(settings)
        unless settings.is_a?(Hash)
          raise Unsupported, "Sidekiq.redis = #{settings.class}: queue's engine dials Redis itself and cannot use a " \
            "connection pool; give the settings Hash instead (config.redis = {url: ..., size: ...})"
        end

        JobQueue.config.redis = settings
      rescue ArgumentError => e
        raise if e.is_a?(Unsupported)

        raise Unsupported, "Sidekiq.redis = {...} (in Sidekiq.configure_server) is queue's Redis too: #{e.message}"
      end

      private

      def adopt_handlers(ours, theirs)
        theirs.each { |handler| ours << handler unless ours.include?(handler) }.size
      end

      # The gem's own error logger: queue logs a job's error itself.
      def gem_logger?(handler)
        defined?(::Sidekiq::ExceptionHandler::Logger) && handler.is_a?(::Sidekiq::ExceptionHandler::Logger)
      end

      def gem_loaded?
        !(::Sidekiq.respond_to?(:queue_compat?) && ::Sidekiq.queue_compat?)
      end

      def install
        ::Sidekiq.singleton_class.prepend(ServerMode) unless ::Sidekiq.singleton_class.include?(ServerMode)
        @installed = true
      end
    end
  end
end
