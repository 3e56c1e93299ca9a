# frozen_string_literal: true

require_relative "worker"
require_relative "context"
require_relative "worker_attributes"
require_relative "bulk_scheduling"

module JobQueue
  # A worker as GitLab writes them: everything JobQueue::Worker has, plus a dedicated queue named after
  # the class, worker attributes, worker context and bulk scheduling helpers.
  #
  #   class Projects::ImportWorker
  #     include JobQueue::ApplicationWorker
  #     urgency :high
  #     feature_category :importers
  #
  #     def perform(project_id) = ...
  #   end
  #
  #   Projects::ImportWorker.queue   # => "projects_import"
  #
  # The queue is the class name without its "Worker" suffix, underscored, modules joined by "_"
  # (`ProcessSomethingWorker` → `process_something`), under the worker's namespace if it has one
  # (`queue_namespace :cronjob` → `cronjob:process_something`), unless `config.routing_rules` send it
  # elsewhere (Routing). `sidekiq_options queue:` in the class itself still wins. Subclasses get queues
  # of their own names, as in GitLab.
  #
  # `bundle exec queue` without -q listens to the queues of every ApplicationWorker loaded once the app
  # has booted (see DeclaredQueues).
  module ApplicationWorker
    @registry = []
    @registry_lock = Mutex.new

    class << self
      def included(base)
        raise ArgumentError, "JobQueue::ApplicationWorker must be included in a class" unless base.is_a?(Class)

        base.include(Worker) unless base.include?(Worker)
        # A queue the class set before this include (as a plain worker) is its explicit choice.
        explicit = base.send(:own_job_options).key?("queue")
        base.extend(ClassMethods)
        base.send(:explicit_queue!) if explicit
        register(base)
      end

      # The named ApplicationWorker classes loaded so far that define `perform`, by name.
      def workers
        @registry_lock.synchronize { @registry.dup }
          .select { |klass| klass.name && klass.method_defined?(:perform) }
          .sort_by(&:name)
      end

      # Queue name => weight of the loaded workers (the highest weight when workers share a queue).
      def queues
        workers.each_with_object({}) do |klass, queues|
          queue = klass.queue
          queues[queue] = [queues[queue] || 0, klass.get_weight].max
        end
      end

      # @api private
      def register(klass)
        @registry_lock.synchronize { @registry << klass unless @registry.include?(klass) }
      end
    end

    # Runs the block in a worker context (see Context): jobs enqueued inside carry it.
    def with_context(attributes, &block)
      Context.with(attributes, &block)
    end

    # Class-level API added to JobQueue::Worker's.
    module ClassMethods
      include WorkerAttributes
      include BulkScheduling

      NAMESPACE_FORMAT = /\A[A-Za-z0-9_.\-]+\z/

      def inherited(subclass)
        super
        ApplicationWorker.register(subclass)
      end

      def sidekiq_options(options = {})
        options = options.transform_keys(&:to_s)
        if options.key?("queue_namespace")
          namespace = options["queue_namespace"]
          unless (namespace.is_a?(Symbol) || namespace.is_a?(String)) && namespace.to_s.match?(NAMESPACE_FORMAT)
            raise ArgumentError, "#{name || inspect}: queue_namespace must be a name of letters, digits, _ . or -, got #{namespace.inspect}"
          end

          options["queue_namespace"] = -namespace.to_s
        end
        explicit_queue! if options.key?("queue")
        super(options)
      end
      alias_method :queue_options, :sidekiq_options

      # With a name, puts this worker's queue under that namespace; without, returns the namespace.
      def queue_namespace(namespace = nil)
        return get_sidekiq_options["queue_namespace"] if namespace.nil?

        sidekiq_options(queue_namespace: namespace)
      end

      # The queue this worker's jobs go to.
      def queue
        get_sidekiq_options["queue"]
      end

      # The queue name derived from the class name (nil for an anonymous class).
      def generated_queue_name
        derived_queue(get_sidekiq_options["queue_namespace"])
      end

      # Sidekiq's options with the queue the routing rules give (by default the generated name) and,
      # when a rule names one, its shard as "store", unless this class gave its own queue. Cached until
      # any worker's options, attributes or the rules change (Worker.options_changed!).
      def get_sidekiq_options
        merged = super
        return unrouted(merged) if @explicit_queue

        own = derived_queue(merged["queue_namespace"])
        return merged if own.nil?

        cache = @queue_options_cache
        return cache[2] if cache && cache[0].equal?(merged) && cache[1].equal?(own)

        queue, shard = Routing.route_for(self, own, merged["queue_namespace"])
        options = merged["queue"] == queue && !merged.key?("store") && shard.nil? ? merged : routed_options(merged, queue, shard)
        @queue_options_cache = [merged, own, options]
        options
      end

      # Deduplication strategy of ApplicationWorkers unless they declare one (used once deduplication
      # is available).
      def default_deduplicate_strategy = :until_executing

      # Runs the block in a worker context (see Context).
      def with_context(attributes, &block)
        Context.with(attributes, &block)
      end

      # True for workers that include CronjobQueue.
      def cronjob_queue? = false

      # The "meta.*" fields a job of this worker with `args`, enqueued now, gets.
      # @api private
      def job_context(args)
        meta = batch_context_for(args) || Context.current
        meta = {"meta.caller_id" => meta["meta.caller_id"] || "Cronjob"} if cronjob_queue?
        category = get_feature_category
        category ? meta.merge("meta.feature_category" => category.to_s) : meta
      end

      private

      # From now on the class's own `queue` option wins over the generated name.
      def explicit_queue!
        @explicit_queue = true
      end

      # A class that gave its own queue is not routed: it keeps no shard a routed parent passed down.
      def unrouted(merged)
        return merged unless merged.key?("store") && !own_job_options.key?("store")

        cache = @unrouted_cache
        return cache[1] if cache && cache[0].equal?(merged)

        options = merged.except("store").freeze
        @unrouted_cache = [merged, options]
        options
      end

      def routed_options(merged, queue, shard)
        options = merged.merge("queue" => queue)
        shard ? options["store"] = shard : options.delete("store")
        options.freeze
      end

      # Memoized per class name and namespace (both frozen, so identity is enough).
      def derived_queue(namespace)
        class_name = name or return nil
        return @derived_queue if @derived_for.equal?(class_name) && @derived_ns.equal?(namespace)

        base = underscore(class_name.delete_suffix("Worker")).tr("/", "_").gsub(/\A_+|_+\z/, "")
        @derived_for = class_name
        @derived_ns = namespace
        @derived_queue = -[namespace, base].compact.join(":")
      end

      # ActiveSupport's String#underscore, for class names.
      def underscore(class_name)
        class_name.gsub("::", "/")
          .gsub(/([A-Z\d]+)([A-Z][a-z])/, '\1_\2')
          .gsub(/([a-z\d])([A-Z])/, '\1_\2')
          .tr("-", "_")
          .downcase
      end
    end
  end
end
