# frozen_string_literal: true

module JobQueue
  # `perform_async`'s common case, in one engine call: when no client middleware, worker context or
  # test mode needs to see the job as a Hash, the engine builds the job itself from a template made
  # once per worker class (its options as JSON, its queue, its deduplication) and the arguments, and
  # queues it. Whatever the engine does not take (arguments other than nil, booleans, small Integers,
  # plain UTF-8 Strings, and Arrays and String-keyed Hashes of those; workers with a `job_context`
  # or `idempotency_arguments`) goes through JobQueue::Client#push as before, with the same result.
  module DirectPush
    # Keys the engine writes itself, or that Ruby turns into others (`expires_in`, expiry.rb); options
    # carrying one of them keep the general path.
    OWN_KEYS = %w[class args jid created_at enqueued_at at expires_in].freeze

    # `store`: the worker's shard (nil for "main"), whose engine the push goes to.
    Template = Struct.new(:native, :queue, :deduplicated, :store)

    module_function

    # The worker's template, or nil when its jobs must be built in Ruby.
    def template_for(worker_class)
      name = worker_class.name
      return nil if name.nil? || worker_class.respond_to?(:job_context) || worker_class.respond_to?(:idempotency_arguments)

      options = worker_class.get_sidekiq_options
      return nil if OWN_KEYS.any? { |key| options.key?(key) }

      queue = options["queue"].to_s
      return nil if queue.empty?

      dedup = worker_class.respond_to?(:deduplication_push_options) ? worker_class.deduplication_push_options : nil
      prefix = JSON.generate(options.merge("queue" => queue, "class" => name)).chomp("}")
      store = options["store"]&.to_s
      store = nil if store == Shards::MAIN
      Template.new(Native::PushTemplate.new(queue, prefix, dedup), queue, !dedup.nil?, store)
    rescue JSON::GeneratorError, EncodingError
      nil
    end
  end
end
