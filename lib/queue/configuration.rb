# frozen_string_literal: true

require_relative "lifecycle"
require_relative "redis_options"
require_relative "redis_pool"
require_relative "routing"
require_relative "shards"

module JobQueue
  # Everything a client or server needs to know, set with `JobQueue.configure { |c| ... }`.
  #
  #   JobQueue.configure do |c|
  #     c.redis = { url: "rediss://redis.example.com:6380/0", password: ENV["REDIS_PASSWORD"] }
  #     c.namespace = "resque:gitlab:"   # optional key prefix
  #     c.concurrency = 10
  #     c.queues = ["critical,3", "default"]
  #     c.error_handlers << ->(error, context) { Bugsnag.notify(error) }   # or ->(error, context, config)
  #   end
  class Configuration
    include Lifecycle

    DEFAULT_REDIS_URL = RedisOptions::DEFAULT_URL
    DEFAULT_JOB_OPTIONS = {"retry" => true, "queue" => "default"}.freeze
    MAX_BATCH_RANGE = (1..1000).freeze
    DEFAULT_MAX_BATCH = 100
    MAX_WEIGHT = 1_000_000
    BUSY_POLL_RANGE = (0..1000).freeze
    DEFAULT_BUSY_POLL_US = 100
    DEFAULT_MALLOC_ARENA_MAX = 2
    MALLOC_ARENA_MAX_RANGE = (1..1024).freeze
    DEFAULT_GC_MALLOC_GROWTH = 4 << 20
    DEFAULT_MALLOC_TRIM_INTERVAL = 5
    JOB_THREAD_POLICIES = [:batch, nil].freeze

    attr_reader :concurrency, :timeout, :max_batch, :batch_expiry, :queues, :namespace, :busy_poll_us, :gitlab_fetcher_scan
    attr_reader :malloc_arena_max, :gc_malloc_growth, :malloc_trim_interval, :job_thread_policy
    attr_reader :error_handlers, :death_handlers, :client_middleware_chain, :server_middleware_chain
    attr_accessor :tag, :labels, :environment, :require_path
    attr_reader :logger

    STRICT_ARGS_MODES = [:raise, :warn, false].freeze
    SIDEKIQ_METRICS_VERSIONS = [7, 8, false].freeze

    def initialize
      @redis_options = RedisOptions.new({})
      @namespace = ""
      @concurrency = 10
      @timeout = 25
      @max_batch = DEFAULT_MAX_BATCH
      @batch_expiry = 30 * 24 * 3600
      @gitlab_fetcher_scan = 60
      @busy_poll_us = DEFAULT_BUSY_POLL_US
      @malloc_arena_max = DEFAULT_MALLOC_ARENA_MAX
      @gc_malloc_growth = DEFAULT_GC_MALLOC_GROWTH
      @malloc_trim_interval = DEFAULT_MALLOC_TRIM_INTERVAL
      @job_thread_policy = :batch
      @queues = [["default", 1]]
      @strict_order = true
      @tag = ""
      @labels = []
      @error_handlers = [method(:log_error)]
      @death_handlers = []
      @client_middleware_chain = Middleware::Chain.new
      @server_middleware_chain = Middleware::Chain.new
      @logger = Logging.default_logger
      @default_logger = true
      @job_logs = :text
      @default_job_options = DEFAULT_JOB_OPTIONS
      @strict_args = :raise
      @sidekiq_metrics = 7
      @router = Routing::Router.new([])
      @redis_pool = RedisPool.new(self) # connects on first use only
      @shards = Shards.new(self)
      Worker.options_changed! if defined?(Worker)
    end

    # The logger for the server's lines and the per-job lines (Sidekiq's shape, at INFO, on stdout by
    # default). An app's own logger gets the same lines through `info`.
    def logger=(logger)
      @logger = logger
      @default_logger = false
      @job_log = nil
    end

    # Whether the logger is still the one this gem made (the engine may then write into it).
    # @api private
    def default_logger?
      @default_logger
    end

    # Redis settings, Sidekiq's keys (redis_options.rb): `url:` (redis://, rediss:// or unix://),
    # `password:`, `namespace:`; `host:`, `port:`, `db:`, `path:`, `ssl:` over the URL; `ssl_params:`;
    # `size:`, `pool_timeout:`, `network_timeout:` for JobQueue.redis's pool; Redis Sentinel's
    # `sentinels:`, `name:`, `role:`, `sentinel_password:`, `sentinel_username:`; `wait_replicas:` and
    # `wait_timeout:` (ms) for pushes that wait for replicas. With no URL, REDIS_URL from
    # the environment, else redis://127.0.0.1:6379/0. What the engine does not use is warned, once.
    def redis=(options)
      parsed = RedisOptions.new(options)
      @redis_options = parsed
      self.namespace = parsed.options[:namespace] if parsed.options.key?(:namespace)
      @engine = nil
      @shards.reset
      @redis_pool.shutdown
      parsed.ignored_by_engine.each { |message| warn_once(message) }
    end

    # Several Redis instances (README, "Shards"): shard name => the options `redis=` takes, e.g.
    # `{"main" => {url: ...}, "jobs_b" => {url: ..., sentinels: [...]}}`. "main" is `redis=`'s
    # server unless given here (then it sets `redis=`). A worker names its shard with
    # `sidekiq_options store: "jobs_b"` or a routing rule; `JobQueue::Client.via("jobs_b") { }` picks
    # one for a block. Each shard's engine is made on first use.
    def redis_shards=(shards)
      @shards.configure(shards)
    end

    # Shard name => options (the Hash as given, "main" included).
    def redis_shards
      @shards.options
    end

    # @api private: the shards (shards.rb).
    attr_reader :shards

    # The engine of shard `name` (a String or Symbol); raises ArgumentError naming the known shards
    # for an unknown one.
    def shard_engine(name)
      name = name.to_s
      return main_engine if name == Shards::MAIN

      @shards.engine(name)
    end

    attr_reader :redis_options

    # Feature flags for deduplication (`disable_<queue>_deduplication`): a callable `->(name) { bool }`.
    # By default the flags kept in Redis (`queue feature enable NAME`), which a push reads inside its
    # own script.
    def feature_flag
      @feature_flag ||= FeatureFlags.new(self)
    end

    def feature_flag=(callable)
      raise ArgumentError, "feature_flag must respond to call(name), got #{callable.inspect}" unless callable.nil? || callable.respond_to?(:call)

      @feature_flag = callable
    end

    def redis
      @redis_options.options.dup
    end

    # The URL the engine dials, with `password:` (and the other options) in it.
    def redis_url
      @redis_options.engine_url
    end

    # What JobQueue.redis and client middleware's `redis_pool` use (redis_pool.rb); it connects on
    # first use, and again after the settings change.
    attr_reader :redis_pool

    # How a push treats arguments that would not come back from JSON as they went in (a Symbol, a
    # Time, a Hash with Symbol keys): :raise (the default), :warn or false. See JobQueue.strict_args!.
    attr_reader :strict_args

    def strict_args=(mode)
      raise ArgumentError, "strict_args must be one of #{STRICT_ARGS_MODES.inspect}, got #{mode.inspect}" unless STRICT_ARGS_MODES.include?(mode)

      @strict_args = mode
    end

    # Which Sidekiq's Metrics page (Sidekiq 7.0+, Web UI "Metrics") the servers also write their
    # per-minute job counts, milliseconds and duration histograms for: 7 (the default) in Sidekiq
    # 7.x's keys, 8 in Sidekiq 8.x's, false for neither. Counted in the engine with the Prometheus
    # counters and flushed with the liveness beat (ARCHITECTURE.md, Metrics).
    attr_reader :sidekiq_metrics

    def sidekiq_metrics=(version)
      raise ArgumentError, "sidekiq_metrics must be one of #{SIDEKIQ_METRICS_VERSIONS.inspect}, got #{version.inspect}" unless SIDEKIQ_METRICS_VERSIONS.any? { |v| v.equal?(version) }

      @sidekiq_metrics = version
    end

    # Logs a warning once per configuration, i.e. per process (options accepted but not used).
    def warn_once(message)
      @warned ||= {}
      return if @warned[message]

      @warned[message] = true
      logger.warn(message)
    end

    # Key prefix for every key, as redis-namespace applies it ("resque:gitlab:"). A namespace given
    # without a trailing colon gets one.
    def namespace=(value)
      value = value.to_s
      value += ":" unless value.empty? || value.end_with?(":")
      @namespace = value
      @engine = nil
      @shards.reset
      @redis_pool.shutdown
    end

    # Microseconds a client call (perform_async and the rest this thread sends on its connection)
    # polls its socket for Redis's reply before sleeping until it comes: 100 by default, 0 never. Over
    # plain TCP only; it backs off by itself when Redis answers slower than that (ARCHITECTURE.md).
    def busy_poll_us=(us)
      raise ArgumentError, "busy_poll_us must be an Integer in #{BUSY_POLL_RANGE}, got #{us.inspect}" unless us.is_a?(Integer) && BUSY_POLL_RANGE.cover?(us)

      @busy_poll_us = us
      @engine = nil
      @shards.reset
    end

    # How many glibc malloc arenas a server process keeps (2 by default; nil: glibc's own limit,
    # 8 a core). The server sets it as it starts, before its threads allocate, unless the process was
    # started with MALLOC_ARENA_MAX, which then wins. ARCHITECTURE.md, "Memory".
    def malloc_arena_max=(max)
      unless max.nil? || (max.is_a?(Integer) && MALLOC_ARENA_MAX_RANGE.cover?(max))
        raise ArgumentError, "malloc_arena_max must be nil or an Integer in #{MALLOC_ARENA_MAX_RANGE}, got #{max.inspect}"
      end

      @malloc_arena_max = max
    end

    # How the kernel schedules a server's job threads: :batch (the default) puts each under Linux's
    # SCHED_BATCH as it starts, so a job thread waking up does not preempt a running thread (most
    # often the one holding the GVL it would then wait for); nil leaves the policy the process
    # started with. A thread started under another policy than the default (chrt, real-time) keeps it.
    # Elsewhere than Linux, nothing to do. thread_policy.rb; ARCHITECTURE.md, "Job threads under
    # SCHED_BATCH".
    def job_thread_policy=(policy)
      raise ArgumentError, "job_thread_policy must be :batch or nil, got #{policy.inspect}" unless JOB_THREAD_POLICIES.include?(policy)

      @job_thread_policy = policy
    end

    # Bytes Ruby may malloc since its last GC, in a server process, before its processor threads run a
    # minor GC with an immediate sweep (4 MB by default; nil: only Ruby's own GC). It frees the buffers
    # of dead Strings that Ruby's lazy sweep would keep until its next cycle (malloc_gc.rb;
    # ARCHITECTURE.md, "Memory").
    def gc_malloc_growth=(bytes)
      unless bytes.nil? || (bytes.is_a?(Integer) && bytes.positive?)
        raise ArgumentError, "gc_malloc_growth must be nil or a positive Integer (bytes), got #{bytes.inspect}"
      end

      @gc_malloc_growth = bytes
    end

    # Seconds between a server's `malloc_trim(0)` calls, which give glibc's free whole pages back to
    # the kernel (5 by default; nil: never). Run by the engine, off the job threads and the GVL.
    # ARCHITECTURE.md, "Memory".
    def malloc_trim_interval=(seconds)
      unless seconds.nil? || (seconds.is_a?(Numeric) && seconds.real? && seconds.positive? && seconds.to_f.finite?)
        raise ArgumentError, "malloc_trim_interval must be nil or a positive number of seconds, got #{seconds.inspect}"
      end

      @malloc_trim_interval = seconds
    end

    def concurrency=(n)
      raise ArgumentError, "concurrency must be a positive Integer, got #{n.inspect}" unless n.is_a?(Integer) && n.positive?

      @concurrency = n
    end

    # Seconds a stopping server waits for running jobs before it puts them back on their queues.
    def timeout=(seconds)
      raise ArgumentError, "timeout must be a non-negative number, got #{seconds.inspect}" unless seconds.is_a?(Numeric) && seconds >= 0

      @timeout = seconds
    end

    # The most jobs one fetch may take for one processor thread (an upper bound: the engine takes fewer
    # when a queue is shallow or its jobs are slow).
    def max_batch=(n)
      raise ArgumentError, "max_batch must be an Integer in #{MAX_BATCH_RANGE}, got #{n.inspect}" unless n.is_a?(Integer) && MAX_BATCH_RANGE.cover?(n)

      @max_batch = n
    end

    # Seconds a batch's data is kept (JobQueue::Batch): from its creation, and again from its
    # success. 30 days by default, as Sidekiq Pro; a batch's own `expires_in` overrides it.
    def batch_expiry=(seconds)
      raise ArgumentError, "batch_expiry must be a positive Integer of seconds, got #{seconds.inspect}" unless seconds.is_a?(Integer) && seconds.positive?

      @batch_expiry = seconds
    end

    # Seconds between a server's scans (SCAN MATCH working:queue:*) for the working lists of
    # gitlab-sidekiq-fetcher processes, whose jobs go back to their queues once the process's
    # heartbeat has expired; one server of all scans per interval. 60 by default; false (or nil)
    # turns the recovery off.
    def gitlab_fetcher_scan=(seconds)
      unless seconds.nil? || seconds == false || (seconds.is_a?(Integer) && seconds.positive?)
        raise ArgumentError, "gitlab_fetcher_scan must be a positive Integer (seconds) or false, got #{seconds.inspect}"
      end

      @gitlab_fetcher_scan = seconds || nil
    end

    # Queues in priority order, each "name" or "name,weight" (or [name, weight]), with Sidekiq 6.4's
    # rules. Without weights the order is strict: a queue is served only while every queue before it is
    # empty. Once any queue has a weight (a whole number), each fetch draws a random order in which
    # a queue comes first in proportion to its weight; a queue without one weighs 1, so equal
    # weights share evenly. Weight 0 counts as 1 and on its own keeps the order strict.
    def queues=(list)
      parsed = parse_queues(list)
      @strict_order = parsed.none? { |_, weight| weight&.positive? }
      @queues = parsed.map { |name, weight| [name, [weight.to_i, 1].max] }
      @queues_set = true
    end

    # True once queues were set (by -q, a config file or the app); else the server picks its defaults.
    def queues_set?
      @queues_set == true
    end

    # True when every fetch tries the queues in the order listed (no queue was given a weight).
    def strict_order?
      @strict_order
    end

    def queue_names
      @queues.map(&:first)
    end

    attr_reader :default_job_options

    # Options every job gets unless its worker or the push says otherwise.
    def default_job_options=(options)
      @default_job_options = DEFAULT_JOB_OPTIONS.merge(options.transform_keys(&:to_s)).freeze
      Worker.options_changed! if defined?(Worker)
    end

    # GitLab's routing rules (README, "Routing rules"): `[query, queue]` or `[query, queue, shard]`,
    # first match wins, checked and compiled here (a bad rule raises ArgumentError naming it).
    # ApplicationWorkers take their queue (and `store`, the shard) from them.
    # Rules without a `*` rule last are warned about, as GitLab does: a worker no rule matches keeps its
    # own queue, which a server given -q may not listen to.
    def routing_rules=(rules)
      router = Routing::Router.new(rules)
      @router = router
      Worker.options_changed! if defined?(Worker)
      return if router.empty? || router.catch_all?

      logger.warn("routing_rules has no [\"*\", queue] rule last: a worker no rule matches keeps its own queue")
    end

    # The rules as set (frozen); [] by default.
    def routing_rules
      @router.rules
    end

    # @api private: the compiled rules (Routing::Router).
    attr_reader :router

    def client_middleware
      yield @client_middleware_chain if block_given?
      @client_middleware_chain
    end

    def server_middleware
      yield @server_middleware_chain if block_given?
      @server_middleware_chain
    end

    # Calls every error handler; a handler that raises is logged and does not stop the others (or the
    # thread that reported). A handler that takes a third argument (Sidekiq 7's
    # `->(error, context, config)`, or `*args`) gets this configuration there; Sidekiq 6's two-argument
    # handlers get the error and the context.
    def report_error(error, context = {})
      @error_handlers.each do |handler|
        takes_config?(handler) ? handler.call(error, context, self) : handler.call(error, context)
      rescue => e
        logger.error("error handler #{handler.inspect} raised #{e.class}: #{e.message}")
      end
    end

    # In a process forked from this one (`queue cluster`'s children): the `JobQueue.redis` connections
    # are the parent's, so they are closed here and new ones made on first use. The engine needs
    # nothing: each thread's connection remembers its pid, and a child dials its own.
    # @api private
    def forked!
      @redis_pool.shutdown
    end

    # [[name, weight or nil], ...] from "name" / "name,weight" / [name, weight] specs; raises
    # ArgumentError for none, a bad one, or a name listed twice.
    def parse_queues(list)
      parsed = Array(list).map { |spec| parse_queue(spec) }
      raise ArgumentError, "at least one queue is needed" if parsed.empty?

      names = parsed.map(&:first)
      dup = names.find { |n| names.count(n) > 1 }
      raise ArgumentError, "queue #{dup.inspect} is listed twice" if dup

      parsed
    end

    # Sidekiq 7's capsules: `capsule("name") { |c| c.concurrency = 1; c.queues = %w[x] }` adds (or
    # changes) a group of threads of its own in the same server (JobQueue::Capsule). "default" is
    # this configuration's own `queues` and `concurrency`.
    def capsule(name)
      name = name.to_s
      raise ArgumentError, "a capsule needs a name" if name.strip.empty?

      cap = name == Capsule::DEFAULT ? DefaultCapsule.new(self) : (capsules[name] ||= Capsule.new(name, self))
      yield cap if block_given?
      cap
    end

    # The capsules besides the default one, by name, in the order they were added.
    def capsules
      @capsules ||= {}
    end

    # Threads of every capsule (Sidekiq 7's `total_concurrency`).
    def total_concurrency
      concurrency + capsules.values.sum(&:concurrency)
    end

    # The native engine for the current settings: the shard a `JobQueue::Client.via` block around
    # this call picked, else "main".
    def engine
      # The thread-local is read only once some `via` block has run: a push that never meets one pays
      # an instance-variable read, not a Thread.current lookup.
      via = @via_seen && Thread.current[Shards::VIA_KEY]
      via ? shard_engine(via) : (@engine ||= build_engine(@redis_options))
    end

    # @api private: a `via` block ran (shards.rb), so #engine must look for one from now on.
    def via_seen!
      @via_seen = true
    end

    # The engine of shard "main" (`redis=`), whatever `via` says.
    def main_engine
      @engine ||= build_engine(@redis_options)
    end

    # @api private: a new engine for one Redis server's RedisOptions (shards.rb makes the others').
    def build_engine(options)
      Native::Engine.new(options.engine_url, @namespace, options.engine_ca_file, @busy_poll_us, options.engine_sentinel, options.engine_wait)
    end

    private

    # [name, weight] with weight nil when none was given.
    def parse_queue(spec)
      name, weight, *extra = spec.is_a?(Array) ? spec : spec.to_s.split(",", 2)
      raise ArgumentError, "queue #{spec.inspect}: expected [name, weight]" if extra.any?

      name = name.to_s.strip
      raise ArgumentError, "queue name must not be empty (in #{spec.inspect})" if name.empty?

      [name, weight.nil? ? nil : parse_weight(weight, spec)]
    end

    # A whole number 0..MAX_WEIGHT, given as an Integer or as decimal digits. Sidekiq's `to_i` would
    # read "x", "-1" or "1.5" as some weight; a typo here should not silently reorder queues.
    def parse_weight(weight, spec)
      digits = weight.is_a?(Integer) ? weight.to_s : weight.to_s.strip
      return digits.to_i if digits.match?(/\A\d+\z/) && digits.to_i <= MAX_WEIGHT

      raise ArgumentError, "queue weight must be a whole number from 0 to #{MAX_WEIGHT}, got #{weight.inspect} (in #{spec.inspect})"
    end

    def takes_config?(handler)
      # A Proc or Method tells its own parameters; `method(:call)` of either is `call(*args)`.
      parameters = (handler.respond_to?(:parameters) ? handler : handler.method(:call)).parameters
      parameters.any? { |type, _| type == :rest } || parameters.count { |type, _| type == :req || type == :opt } >= 3
    end

    # As Sidekiq's default error handler: the error, then its backtrace, at WARN; a job's error in
    # the job's log context (class and jid), an ordered batch's in the batch's (the caller sets it).
    def log_error(error, context)
      job = context[:job]
      return Logging.with_job(job) { log_error_lines(error, context) } if job.is_a?(Hash) && !Logging.in_context?

      log_error_lines(error, context)
    end

    def log_error_lines(error, context)
      logger.warn("#{context[:context] || "error"}: #{error.class}: #{error.message}")
      backtrace = error.backtrace
      logger.warn(backtrace.join("\n")) if backtrace&.any?
    end
  end
end
