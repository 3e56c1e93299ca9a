# frozen_string_literal: true

# `Sidekiq`'s module methods, each mapped onto JobQueue. As in Sidekiq 6.4, `configure_server` and
# `configure_client` yield the Sidekiq module itself, so an initializer's `config.redis = {...}`,
# `config.server_middleware { |chain| ... }`, `config.on(:startup) { ... }`, `config.error_handlers`,
# `config.options[:concurrency]` and `config[:concurrency]` all land here.
module Sidekiq
  # The API level the shim speaks (code that branches on Sidekiq's version takes the 6.4 path).
  VERSION = "6.4.1"
  NAME = "Sidekiq"

  # Raised in a job still running when the shutdown timeout runs out.
  Shutdown = JobQueue::Shutdown

  module Middleware
    Chain = JobQueue::Middleware::Chain
  end

  # Sidekiq Pro's batches are ours (JobQueue::Batch; README, "Batches").
  Batch = JobQueue::Batch
  BatchSet = JobQueue::BatchSet

  # `defined?(Sidekiq::CLI)` is how Sidekiq 6.4 apps ask whether they run in the server.
  module CLI; end if JobQueue.server?

  # What the sidekiq gem has and this shim does not, with what to use instead.
  MISSING = {
    Web: "mount the real Sidekiq::Web from an app that has the sidekiq gem, on the same Redis: it reads queue's data (README, \"Moving from Sidekiq\")",
    **%i[Stats Queue ScheduledSet RetrySet DeadSet ProcessSet Workers].to_h { |name|
      [name, "require \"sidekiq/api\" first (it loads JobQueue's inspection API under Sidekiq's names)"]
    },
    Extensions: "the delay extensions (`.delay`) are not available: call a worker's perform_async",
    Limiter: "Sidekiq Enterprise rate limiters are not available",
    Launcher: "run `bundle exec queue`",
    Manager: "run `bundle exec queue`"
  }.freeze

  class << self
    # @api private: tells this shim's Sidekiq from the gem's.
    def queue_compat? = true

    # The block is kept for configure_embed, as in Sidekiq 7.
    def configure_server(&block)
      (@server_blocks ||= []) << block if block
      yield self if server?
    end

    # Sidekiq 7's embedded mode, as JobQueue.configure_embed (README, "Embedded mode"): the
    # configure_server blocks run (yielded this module, as above), then this block, which is yielded
    # JobQueue's configuration (`concurrency=`, `queues=`, `redis=`, ... as Sidekiq 7's config).
    # Returns an object with `run`, `quiet` and `stop`.
    def configure_embed(&block)
      JobQueue.configure_embed do |config|
        @server_blocks&.each { |server_block| server_block.call(self) }
        block&.call(config)
      end
    end

    def configure_client
      yield self unless server?
    end

    def server? = JobQueue.server?

    def options
      @options ||= JobQueue::Compat::SidekiqOptions.new
    end

    def options=(hash)
      options.merge!(hash)
    end

    def [](key) = options[key]

    def []=(key, value)
      options[key] = value
    end

    # Sidekiq's Redis settings (url:, password:, namespace:, size:, …; see README, Configuration).
    def redis=(settings)
      unless settings.is_a?(Hash)
        raise ArgumentError, "Sidekiq.redis = takes the settings Hash ({url: ...}), got #{settings.class}: " \
          "queue's engine keeps its own connections (JobQueue.redis_pool is built from the settings)"
      end

      JobQueue.config.redis = settings
    end

    # Sidekiq 7's configuration object: `Sidekiq.default_configuration.capsule(...)`, `.redis = `,
    # `[:key]`, ... answer as this module does (it is the shim's configuration).
    def default_configuration = self

    # Sidekiq 7's capsules (JobQueue::Configuration#capsule): `config.capsule("x") { |c| ... }`.
    def capsule(name, &block) = JobQueue.config.capsule(name, &block)

    def capsules = JobQueue.config.capsules

    def total_concurrency = JobQueue.config.total_concurrency

    # Sidekiq 7's `config.concurrency =` and `config.queues =` (the default capsule's).
    def concurrency = JobQueue.config.concurrency

    def concurrency=(n)
      JobQueue.config.concurrency = n
    end

    def queues = JobQueue.config.queue_names

    def queues=(list)
      JobQueue.config.queues = list
    end

    def redis(&block)
      raise ArgumentError, "requires a block" unless block

      JobQueue.redis(&block)
    end

    def redis_pool = JobQueue.redis_pool

    def redis_info = JobQueue.redis(&:info)

    def client_middleware(&block) = JobQueue.config.client_middleware(&block)

    def server_middleware(&block) = JobQueue.config.server_middleware(&block)

    def default_server_middleware = JobQueue::Middleware::Chain.new

    def on(event, &block) = JobQueue.config.on(event, &block)

    def error_handlers = JobQueue.config.error_handlers

    def death_handlers = JobQueue.config.death_handlers

    def strict_args!(mode = :raise) = JobQueue.strict_args!(mode)

    # Merged over the options set before, as in Sidekiq.
    def default_job_options=(hash)
      Worker.check_supported!(hash, "Sidekiq.default_job_options")
      JobQueue.config.default_job_options = JobQueue.config.default_job_options.merge(hash.transform_keys(&:to_s))
    end
    alias_method :default_worker_options=, :default_job_options=

    def default_job_options = JobQueue.config.default_job_options
    alias_method :default_worker_options, :default_job_options

    # Accepted, not used: the scheduler is punctual (one elected process, a few ms after due time).
    def average_scheduled_poll_interval=(interval)
      options[:average_scheduled_poll_interval] = interval
    end

    def logger = JobQueue.logger

    # nil silences it, as in Sidekiq.
    def logger=(logger)
      return JobQueue.logger.tap { |l| l.level = ::Logger::FATAL } if logger.nil?

      JobQueue.config.logger = logger
    end

    def log_formatter = JobQueue.logger.formatter

    def log_formatter=(formatter)
      JobQueue.logger.formatter = formatter
    end

    def load_json(string) = JSON.parse(string)

    def dump_json(object) = JSON.generate(object)

    def pro? = nil

    def ent? = nil

    def const_missing(name)
      instead = MISSING[name]
      return super unless instead

      raise JobQueue::Compat.unsupported("Sidekiq::#{name}", instead)
    end
  end
end
