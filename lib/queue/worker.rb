# frozen_string_literal: true

require_relative "deduplication"
require_relative "direct_push"
require_relative "expiry"
require_relative "inline"
require_relative "limits"

module JobQueue
  # Include in a class to make it a worker, with Sidekiq's API:
  #
  #   class HardWorker
  #     include JobQueue::Worker
  #     sidekiq_options queue: "critical", retry: 5, backtrace: 10
  #     sidekiq_retry_in { |count, exception| 10 * (count + 1) }   # seconds, :kill or :discard
  #     sidekiq_retries_exhausted { |job, exception| Alerts.notify(job["jid"]) }
  #
  #     def perform(user_id, opts = {}) = User.find(user_id).sync!(**opts)
  #   end
  #
  #   HardWorker.perform_async(1)
  #   HardWorker.perform_in(300, 2)
  #   HardWorker.set(queue: "low", wait: 60).perform_async(3)
  #   HardWorker.perform_bulk([[1], [2], [3]])
  module Worker
    # Options understood by the engine; any other key is kept in the job hash for middleware.
    OPTION_CHECKS = {
      "queue" => ->(v) { (v.is_a?(String) || v.is_a?(Symbol)) && !v.to_s.empty? },
      "retry" => ->(v) { v == true || v == false || (v.is_a?(Integer) && v >= 0) },
      "retry_queue" => ->(v) { v.is_a?(String) || v.is_a?(Symbol) },
      "backtrace" => ->(v) { v == true || v == false || (v.is_a?(Integer) && v >= 0) },
      "dead" => ->(v) { v == true || v == false },
      "tags" => ->(v) { v.is_a?(Array) },
      "expires_in" => ->(v) { Expiry.valid?(v) },
      "retry_for" => ->(v) { v.is_a?(Numeric) && v >= 0 }, # seconds after the first failure (Sidekiq 7.1+)
      "store" => ->(v) { (v.is_a?(String) || v.is_a?(Symbol)) && v.to_s.match?(Shards::NAME) } # the shard (GitLab's name)
    }.freeze

    @options_generation = 0

    class << self
      # Raises ArgumentError ("<prefix> retry: \"bogus\"") when a value OPTION_CHECKS refuses.
      def check_options!(options, prefix)
        options.each do |key, value|
          check = OPTION_CHECKS[key]
          raise ArgumentError, "#{prefix} #{key}: #{value.inspect}" if check && !check.call(value)
        end
      end

      # Bumped whenever any worker's options (or the defaults) change, so cached merges are redone.
      attr_reader :options_generation

      def options_changed!
        @options_generation += 1
      end
    end

    def self.included(base)
      raise ArgumentError, "JobQueue::Worker must be included in a class" unless base.is_a?(Class)

      base.extend(ClassMethods)
    end

    attr_accessor :jid

    # The processor running this job (Sidekiq 7's `_context`; not a public API).
    attr_accessor :_context

    # The batch this job belongs to (Sidekiq Pro's `bid`), nil outside one.
    attr_accessor :bid

    # This job's batch (JobQueue::Batch), to add jobs with `batch.jobs { ... }`; nil outside one.
    def batch
      bid && Batch.new(bid)
    end

    # Sidekiq Pro's check: false once the job's batch was invalidated (`Batch#invalidate_all`).
    def valid_within_batch?
      bid.nil? || Batch.new(bid).valid?
    end

    # Sidekiq 7's `interrupted?`: true once the server running this job is stopping (quiet or TERM),
    # so a long job can stop early. Nil outside a server (perform_inline, the testing modes).
    def interrupted?
      @_context&.stopping?
    end

    # The configured logger, inside `perform` as in Sidekiq::Worker#logger.
    def logger
      JobQueue.logger
    end

    # Class-level API of a worker.
    module ClassMethods
      include Deduplication
      include Limits::DSL

      def sidekiq_options(options = {})
        options = options.transform_keys(&:to_s)
        Worker.check_options!(options, "#{name}: invalid sidekiq_options")
        options["queue"] = options["queue"].to_s if options.key?("queue")
        options["retry_queue"] = options["retry_queue"].to_s if options.key?("retry_queue")
        options["store"] = options["store"].to_s if options.key?("store")
        @job_options = own_job_options.merge(options)
        Worker.options_changed!
      end
      alias_method :queue_options, :sidekiq_options

      # Options of this class, merged over its superclass's and the global defaults (frozen; cached
      # until any worker's options change).
      def get_sidekiq_options
        generation = Worker.options_generation
        return @merged_options if @merged_generation == generation

        inherited = superclass.respond_to?(:get_sidekiq_options) ? superclass.get_sidekiq_options : JobQueue.config.default_job_options
        @merged_options = inherited.merge(own_job_options).freeze
        @merged_generation = generation
        @merged_options
      end

      # Runs this worker on a schedule: `cron "*/5 * * * *"` (options as a schedule file's: `name`,
      # default the class name underscored; `args`, `queue`, `description`, `catch_up`, ...). The
      # server stores it at start with the schedule file's (lib/queue/cron.rb).
      def cron(cron, **options)
        Cron.declare(self, cron, **options)
      end

      def sidekiq_retry_in(&block)
        @retry_in_block = block
      end

      def sidekiq_retries_exhausted(&block)
        @retries_exhausted_block = block
      end

      def sidekiq_retry_in_block
        @retry_in_block || (superclass.respond_to?(:sidekiq_retry_in_block) ? superclass.sidekiq_retry_in_block : nil)
      end

      def sidekiq_retries_exhausted_block
        @retries_exhausted_block || (superclass.respond_to?(:sidekiq_retries_exhausted_block) ? superclass.sidekiq_retries_exhausted_block : nil)
      end

      def perform_async(*args)
        JobQueue::Client.new.push_args(self, args)
      end

      # Runs after `interval` seconds (or at an epoch time, if the number is that large).
      def perform_in(interval, *args)
        Setter.new(self, {}).perform_in(interval, *args)
      end
      alias_method :perform_at, :perform_in

      def perform_bulk(args_list, **options)
        Setter.new(self, {}).perform_bulk(args_list, **options)
      end

      # Runs the job now, in this thread, as Sidekiq 6.4's perform_inline: client middleware, the job
      # through JSON, server middleware, `perform`. Returns true, or nil if a middleware stopped it.
      def perform_inline(*args)
        Setter.new(self, {}).perform_inline(*args)
      end
      alias_method :perform_sync, :perform_inline

      # Options for the next push only: `queue:`, `retry:`, any job option, and `wait:` (seconds) or
      # `wait_until:` (a Time or epoch seconds).
      def set(options)
        Setter.new(self, options)
      end

      def client_push(item)
        JobQueue::Client.new.push(item)
      end

      # @api private: the engine's template for this worker's `perform_async` (DirectPush), made
      # again when any worker's options change.
      def push_template
        generation = Worker.options_generation
        return @push_template if @push_template_generation == generation

        @push_template = DirectPush.template_for(self)
        @push_template_generation = generation
        @push_template
      end

      private

      def own_job_options
        @job_options || {}
      end
    end

    # The result of `Worker.set(...)`: pushes with extra options.
    class Setter
      def initialize(klass, options)
        @klass = klass
        @options = {}
        set(options)
      end

      def set(options)
        options = options.transform_keys(&:to_s)
        Worker.check_options!(options, "#{@klass}.set: invalid option")
        wait = options.delete("wait")
        wait_until = options.delete("wait_until")
        @at = Time.now.to_f + Float(wait) if wait
        @at = wait_until.to_f if wait_until
        @options.merge!(options)
        self
      end

      # `set(sync: true).perform_async` runs the job inline, as in Sidekiq.
      def perform_async(*args)
        return perform_inline(*args) if @options["sync"] == true

        item = @options.merge("class" => @klass, "args" => args)
        item["at"] = @at if @at
        @klass.client_push(item)
      end

      def perform_in(interval, *args)
        raise ArgumentError, "perform_in needs a Numeric interval or a Time, got #{interval.inspect}" unless interval.is_a?(Numeric) || interval.is_a?(Time)

        now = Time.now.to_f
        at = interval.to_f
        at = now + at if at < 1_000_000_000
        item = @options.merge("class" => @klass, "args" => args)
        item["at"] = at if at > now
        @klass.client_push(item)
      end
      alias_method :perform_at, :perform_in

      def perform_inline(*args)
        Inline.perform(@options.merge("class" => @klass, "args" => args))
      end
      alias_method :perform_sync, :perform_inline

      # `batch_size:` jobs per round trip; Sidekiq 8's `at:` (one time, or one per job) or
      # `spread_interval:` (random times over that many seconds) schedules them.
      def perform_bulk(args_list, batch_size: 1000, at: nil, spread_interval: nil)
        unless batch_size.is_a?(Integer) && batch_size.positive?
          raise ArgumentError, "#{@klass}.perform_bulk: batch_size must be a positive Integer, got #{batch_size.inspect}"
        end
        raise ArgumentError, "#{@klass}.perform_bulk needs an Array of argument Arrays" unless args_list.is_a?(Array)

        ats = bulk_times(args_list.size, at, spread_interval)
        args_list.each_slice(batch_size).with_index.flat_map do |slice, n|
          next JobQueue::Client.new.push_bulk_args(@klass, slice) if @options.empty? && ats.nil?

          item = @options.merge("class" => @klass, "args" => slice)
          item["at"] = ats.is_a?(Array) ? ats[n * batch_size, slice.size] : ats if ats
          JobQueue::Client.new.push_bulk(item)
        end
      end

      private

      # The jobs' times: `at:`, `spread_interval:` or `set(wait:)`, only one of them; nil for none.
      def bulk_times(count, at, spread_interval)
        given = {"at:" => at, "spread_interval:" => spread_interval, "set(wait/wait_until)" => @at}.compact
        raise ArgumentError, "#{@klass}.perform_bulk takes one of #{given.keys.join(" and ")}, not both" if given.size > 1
        if at.is_a?(Array) && at.size != count
          raise ArgumentError, "#{@klass}.perform_bulk: at: has #{at.size} times for #{count} jobs"
        end

        spread_interval ? JobQueue::Client.spread_times(spread_interval, count) : at || @at
      end
    end
  end

  # Sidekiq 6.3+ calls workers jobs; both names work.
  Job = Worker
end
