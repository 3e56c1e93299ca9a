# frozen_string_literal: true

module JobQueue
  # The Redis instances jobs are spread over (`config.redis_shards`; README, "Shards"): a name per
  # instance, "main" being `config.redis`. Each shard is a complete Sidekiq keyspace of its own: a
  # queue lives on one shard with its scheduled jobs, retries, deduplication keys and ordered queues,
  # because whatever pushes them uses that shard's engine. One engine per shard, made on first use.
  #
  # Which shard a push goes to: the shard of an enclosing `JobQueue::Client.via(name) { }` block (a
  # thread-local, Sidekiq Pro's `via`), else the worker's `store` option (GitLab's name; a routing
  # rule's third element sets it), else "main". The Ruby API, CLI, dashboard and metrics read every
  # shard, or the one `via` (or a `shard:` argument) selects.
  class Shards
    MAIN = "main"
    # The Thread.current key `via` sets: the name of the shard the block picked.
    VIA_KEY = :job_queue_via_shard
    NAME = /\A[A-Za-z0-9_.-]+\z/

    def initialize(config)
      @config = config
      @options = {}
      @engines = {}
      @lock = Mutex.new
    end

    # Takes `config.redis_shards = {name => redis options}`; every entry is checked here (a bad one
    # raises ArgumentError naming the shard).
    def configure(shards)
      raise ArgumentError, "redis_shards must be a Hash of shard name => redis options, got #{shards.inspect}" unless shards.is_a?(Hash)

      parsed = shards.to_h do |name, options|
        name = name.to_s
        raise ArgumentError, "redis_shards: invalid shard name #{name.inspect} (letters, digits, _ . -)" unless name.match?(NAME)

        [name, parse(name, options)]
      end
      @config.redis = shards.find { |name, _| name.to_s == MAIN }.last if parsed.key?(MAIN)
      @lock.synchronize do
        @options = parsed.except(MAIN).freeze
        @engines = {}
      end
      @given = shards
    end

    # The shards as given ({} when none were).
    def options
      @given || {}
    end

    # Every shard's name, "main" first.
    def names
      [MAIN, *@options.keys]
    end

    # True when more than "main" is configured.
    def many?
      !@options.empty?
    end

    # The engine of shard `name` (not "main": Configuration#main_engine has it).
    def engine(name)
      @engines[name] || @lock.synchronize do
        @engines[name] ||= begin
          options = @options[name] or raise ArgumentError, unknown(name)
          @config.build_engine(options)
        end
      end
    end

    # Checks a shard name (for --shard, `via`, `store:`); returns it as a String.
    def check!(name)
      name = name.to_s
      raise ArgumentError, unknown(name) unless name == MAIN || @options.key?(name)

      name
    end

    # Forgets the engines made so far (the settings they were made with changed).
    def reset
      @lock.synchronize { @engines = {} }
    end

    # Runs the block with `name` as the thread's shard (see JobQueue::Client.via); nests, and restores
    # the outer shard afterwards, also when the block raises.
    def self.via(name)
      raise ArgumentError, "JobQueue::Client.via needs a block" unless block_given?

      config = JobQueue.config
      name = config.shards.check!(name)
      config.via_seen!
      outer = Thread.current[VIA_KEY]
      Thread.current[VIA_KEY] = name
      begin
        yield
      ensure
        Thread.current[VIA_KEY] = outer
      end
    end

    # The shard a `via` block around this call picked, or nil.
    def self.current
      Thread.current[VIA_KEY]
    end

    private

    def parse(name, options)
      raise ArgumentError, "redis_shards: shard #{name.inspect} needs a Hash of redis options (url:, sentinels:, ...), got #{options.inspect}" unless options.is_a?(Hash)

      parsed = RedisOptions.new(options)
      if parsed.options.key?(:namespace) && name != MAIN
        raise ArgumentError, "redis_shards: shard #{name.inspect}: namespace: is shared by every shard; set config.namespace (or main's namespace:)"
      end

      parsed
    rescue ArgumentError => e
      raise if e.message.start_with?("redis_shards")

      raise ArgumentError, "redis_shards: shard #{name.inspect}: #{e.message}"
    end

    def unknown(name)
      "unknown shard #{name.inspect}; the configured shards are #{names.map(&:inspect).join(", ")} (config.redis_shards)"
    end
  end
end
