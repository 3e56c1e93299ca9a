# frozen_string_literal: true

module JobQueue
  # Concurrency and rate limits per worker class, counted cluster-wide in Redis by the engine
  # (ext/queue_core/src/limits/):
  #
  #   class ExportWorker
  #     include JobQueue::Worker
  #     concurrency_limit 5                                    # GitLab's name; also -> { Setting.limit }
  #     concurrency_limit 1, key: ->(account_id, *) { account_id } # one at a time per account
  #     rate_limit 100, per: 60                                # at most 100 starts in any 60 s
  #     rate_limit 10, per: 2, kind: :bucket, key: ->(host, *) { host }
  #   end
  #
  # The check happens as a job is about to start: the processor evaluates the limit (a lambda is
  # called then) and the keys (called with the job's arguments) and the engine takes a slot and a
  # token in one script call, or holds the job back: over its concurrency limit it is deferred (out
  # of the working list, no thread held, resumed in arrival order as slots free); over its rate
  # limit it goes to `schedule` for when its booked start comes. Neither is a failure or a retry.
  # A class without limits costs nothing: no engine call, no Redis command.
  module Limits
    KINDS = %i[window bucket].freeze

    # A worker's concurrency limit: an Integer ≥ 0 or a callable answering one; an optional key.
    Concurrency = Struct.new(:limit, :key) do
      def current(klass)
        value = limit.respond_to?(:call) ? limit.call : limit
        return value if value.is_a?(Integer) && value >= 0

        raise ArgumentError, "#{klass}: concurrency_limit lambda returned #{value.inspect}; expected an Integer >= 0"
      end
    end

    # A worker's rate limit: `count` starts per `per` seconds, of a kind, optionally keyed.
    Rate = Struct.new(:count, :per, :kind, :key)

    # Both limits of a class (either may be nil).
    Spec = Struct.new(:concurrency, :rate)

    @classes = []
    @lock = Mutex.new
    @generation = 0

    class << self
      # How many times a class declared a limit: a processor that cached which classes have none
      # (Processor#native_class) asks again when it changes.
      attr_reader :generation

      # @api private
      def declared
        @lock.synchronize { @generation += 1 }
      end

      # Classes that declared a concurrency limit, for publishing their limits: those its name finds.
      # The engine counts a limit under the class's name and a server finds a job's class by it, so a
      # class that name does not lead to (anonymous, not yet assigned to its constant, or replaced by a
      # reload) has nothing to publish.
      def classes
        @lock.synchronize { @classes.dup }.select { |klass| by_name?(klass) }
      end

      def by_name?(klass)
        (name = klass.name) && Object.const_get(name).equal?(klass)
      rescue NameError
        false
      end

      def register(klass)
        @lock.synchronize { @classes << klass unless @classes.include?(klass) }
      end

      # Checks the running job's limits through `fetcher` (Native::Fetcher). True when it must not
      # run now (deferred, scheduled, gone, or the check could not reach Redis: the engine then puts
      # it back on its queue). Any other error (a lambda that raised, Redis refusing the script)
      # propagates: the processor files the job as failed with it.
      def held_back?(fetcher, klass, spec, job, config)
        name = klass.name
        conc = spec.concurrency
        rate = spec.rate
        # Per job, so kept to a few calls: an unkeyed limit's key is the class name, a constant limit
        # (checked at declaration) is itself.
        ckey = conc && (conc.key ? key_for(name, conc.key, job["args"]) : name)
        cap = conc ? ((limit = conc.limit).is_a?(Integer) ? limit : conc.current(klass)) : 0
        rkey = rate && (rate.key ? key_for(name, rate.key, job["args"]) : name)
        # Covered by the slots and tokens this process leased: taken in memory, no Redis call.
        return false if fetcher.limit_leased(ckey, cap, rkey)

        outcome = fetcher.limit(
          name, job["jid"].to_s, ckey, cap,
          rkey, rate ? rate.kind.name : "", rate ? rate.count : 0, rate ? rate.per.to_f : 0.0
        )
        !outcome.nil?
      rescue ConnectionError => e
        config.report_error(e, context: "checking a job's limits failed; it goes back to its queue")
        true
      end

      # `[concurrency key or nil, limit, rate key or nil]` for limits the engine can check against
      # the process's leases by itself (Fetcher#run): unkeyed, with a constant concurrency limit, as
      # #held_back? would name them. nil when a job's limits need Ruby (a key or limit lambda).
      def leasable(klass, spec)
        conc = spec.concurrency
        rate = spec.rate
        return nil if conc&.key || rate&.key || (conc && !conc.limit.is_a?(Integer))

        name = klass.name or return nil
        [conc && -name, conc ? conc.limit : 0, rate && -name].freeze
      end

      # The limit's key in Redis: the class, or `Class[key]` with the key lambda's answer for `args`.
      def key_for(name, key, args)
        key ? "#{name}[#{key.call(*args)}]" : name
      end

      # Publishes every registered class's current concurrency limit (lambdas evaluated now) and
      # resumes deferred jobs a raised limit lets go. A lambda that raises is reported and skipped.
      def publish(config, engine = config.engine)
        caps = classes.filter_map do |klass|
          conc = klass.queue_limits&.concurrency or next
          [klass.name, conc.current(klass)]
        rescue => e
          config.report_error(e, context: "evaluating #{klass}'s concurrency_limit failed")
          nil
        end
        engine.limits_publish(caps) unless caps.empty?
        caps
      end

      # `[{class:, limit:, running:, deferred:}, …]` cluster-wide, for the dashboard and /metrics.
      def stats(config = JobQueue.config)
        config.engine.limits_stats.map do |klass, limit, running, deferred|
          {class: klass, limit: limit, running: running, deferred: deferred}
        end
      end
    end

    # Re-reads lambda limits every INTERVAL in a server process and publishes them when they change,
    # so a limit that rises (from 0 too) lets deferred jobs go even when none of the class's jobs is
    # being fetched. Constant limits are published once, at start.
    class Refresher
      INTERVAL = 1.0

      # `engine`: the shard the server serves (its Launcher's).
      def self.start(config, engine = config.engine)
        new(config, engine).tap(&:start)
      end

      def initialize(config, engine = config.engine)
        @config = config
        @engine = engine
        @mutex = Mutex.new
        @wake = ConditionVariable.new
        @stopping = false
      end

      def start
        @last = publish
        return unless Limits.classes.any? { |k| k.queue_limits&.concurrency&.limit.respond_to?(:call) }

        @thread = Thread.new do
          refresh until wait
        end
        @thread.name = "queue-limits"
      end

      def stop
        @mutex.synchronize do
          @stopping = true
          @wake.signal
        end
        @thread&.join(2)
      end

      private

      # Publishes the limits when a lambda's answer changed since the last publish.
      def refresh
        caps = Limits.classes.filter_map { |k| (c = k.queue_limits&.concurrency) && [k.name, c.current(k)] }
        @last = publish if caps != @last
      rescue => e
        @config.report_error(e, context: "refreshing concurrency limits failed")
      end

      # Waits INTERVAL (or until stopped); true once stopping.
      def wait
        @mutex.synchronize do
          @wake.wait(@mutex, INTERVAL) unless @stopping
          @stopping
        end
      end

      def publish
        Limits.publish(@config, @engine)
      rescue ConnectionError, RedisError => e
        @config.report_error(e, context: "publishing concurrency limits failed")
        nil
      end
    end

    # The worker DSL (extended into every JobQueue::Worker class).
    module DSL
      # `concurrency_limit 5`, `concurrency_limit -> { 5 }` (read as each job starts), optionally
      # `key: ->(*args) { … }` for a limit per key (Solid Queue's limits_concurrency). 0 holds the
      # worker's jobs until the limit rises.
      def concurrency_limit(limit, key: nil)
        unless (limit.is_a?(Integer) && limit >= 0) || limit.respond_to?(:call)
          raise ArgumentError, "#{limit_owner}: concurrency_limit must be an Integer >= 0 or a lambda, got #{limit.inspect}"
        end

        check_limit_key!("concurrency_limit", key)
        @queue_limits = Spec.new(Concurrency.new(limit, key), queue_limits&.rate)
        Limits.register(self)
        Limits.declared
      end

      # `rate_limit 100, per: 60` (seconds), `kind: :window` (at most `count` starts in any `per`
      # seconds) or `:bucket` (a bucket of `count` tokens refilled over `per` seconds), `key:` as above.
      def rate_limit(count, per:, kind: :window, key: nil)
        raise ArgumentError, "#{limit_owner}: rate_limit count must be an Integer > 0, got #{count.inspect}" unless count.is_a?(Integer) && count.positive?
        unless per.is_a?(Numeric) && !per.is_a?(Complex) && per.to_f.positive? && per.to_f.finite?
          raise ArgumentError, "#{limit_owner}: rate_limit per: must be a positive number of seconds, got #{per.inspect}"
        end
        raise ArgumentError, "#{limit_owner}: rate_limit kind: must be one of #{KINDS.map(&:inspect).join(", ")}, got #{kind.inspect}" unless KINDS.include?(kind)

        check_limit_key!("rate_limit", key)
        @queue_limits = Spec.new(queue_limits&.concurrency, Rate.new(count, per.to_f, kind, key))
        Limits.declared
      end

      # GitLab's reader: the concurrency limit now (a lambda evaluated), nil for none.
      def get_concurrency_limit
        queue_limits&.concurrency&.current(self)
      end

      # This class's limits (inherited), nil for none. @api private
      def queue_limits
        return @queue_limits if defined?(@queue_limits)

        superclass.respond_to?(:queue_limits) ? superclass.queue_limits : nil
      end

      private

      def limit_owner = name || inspect

      def check_limit_key!(what, key)
        return if key.nil? || key.respond_to?(:call)

        raise ArgumentError, "#{limit_owner}: #{what} key: must be a lambda of the job's arguments, got #{key.inspect}"
      end
    end
  end
end
