# frozen_string_literal: true

module JobQueue
  # The pool behind `JobQueue.redis { |conn| ... }` and the `redis_pool` client middleware receives,
  # as Sidekiq.redis_pool: redis-rb connections (the `redis` gem) to the configured server, made on
  # first use. The gem's own work never goes through it (the engine has its own connections), so
  # nothing is required or dialled until an app asks.
  #
  # With a namespace the connections are Redis::Namespace ones (the redis-namespace gem), as in
  # Sidekiq; without that gem the call raises rather than touch unprefixed keys.
  class RedisPool
    # The gems its connections need (the gem itself needs neither).
    GEMS = %w[redis connection_pool].freeze

    # Those of GEMS this process cannot load: not installed, or not in the app's bundle.
    def self.missing_gems
      GEMS.reject { |name| loadable?(name) }
    end

    def self.loadable?(name)
      return true if defined?(::Gem::Specification) && ::Gem::Specification.find_all_by_name(name).any?

      !$LOAD_PATH.resolve_feature_path(name).nil?
    rescue LoadError
      false
    end
    private_class_method :loadable?

    def initialize(config)
      @config = config
      @lock = Mutex.new
      @pool = nil
    end

    # Yields a connection checked out for the block; returns the block's value.
    def with(&block)
      raise ArgumentError, "JobQueue.redis needs a block: JobQueue.redis { |conn| conn.get(\"key\") }" unless block

      pool.with(&block)
    end

    def size
      @config.redis_options.pool_size(@config.concurrency, JobQueue.server?)
    end

    def inspect
      "#<#{self.class.name} #{@pool ? "connected" : "not connected"}>"
    end

    # Closes the connections made so far (a new settings assignment, or a forked child).
    def shutdown
      pool = @lock.synchronize { @pool.tap { @pool = nil } }
      pool&.shutdown { |conn| conn.close if conn.respond_to?(:close) }
    end

    private

    def pool
      @pool || @lock.synchronize { @pool ||= build }
    end

    def build
      require "redis"
      require "connection_pool"
      check_namespace!
      options = @config.redis_options
      ConnectionPool.new(size: size, timeout: options.pool_timeout) { connect(options) }
    rescue LoadError => e
      raise LoadError, "JobQueue.redis needs the redis and connection_pool gems (#{e.message}); add them to the Gemfile"
    end

    def connect(options)
      conn = ::Redis.new(**options.client_options)
      namespace = @config.namespace.delete_suffix(":")
      namespace.empty? ? conn : ::Redis::Namespace.new(namespace, redis: conn)
    end

    def check_namespace!
      return if @config.namespace.empty?

      require "redis/namespace"
    rescue LoadError
      raise ArgumentError,
        "JobQueue.redis: the namespace #{@config.namespace.inspect} is set, and without the redis-namespace gem " \
        "the connection would not prefix keys; add redis-namespace to the Gemfile, or prefix keys with JobQueue.config.namespace"
    end
  end
end
