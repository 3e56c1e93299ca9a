# frozen_string_literal: true

module JobQueue
  module Compat
    # `Sidekiq.options` (and `Sidekiq[:key]`): Sidekiq 6.4's options Hash, read and written through
    # to JobQueue.config. Keys with no meaning here are accepted where Sidekiq's behaviour is kept
    # anyway, and refused with the replacement where it is not.
    class SidekiqOptions
      # Accepted and not used: queue's scheduler is punctual (one elected process, ms after the due
      # time), so there is no poll interval to set.
      IGNORED = %i[average_scheduled_poll_interval poll_interval_average scheduled_enqueue].freeze
      # Fixed in queue; read as queue's value (Sidekiq's default), accepted on write only with it.
      # `max_retries` is the limit of a job with `retry: true` (sentry-sidekiq's error handler reads it).
      FIXED = {max_retries: 25, dead_max_jobs: 10_000, dead_timeout_in_seconds: 180 * 24 * 60 * 60}.freeze
      REFUSED = {
        max_retries: "the retry limit is the job's: `sidekiq_options retry: N` or `Sidekiq.default_job_options = {retry: N}`", # on write
        fetch: "queue's fetch is reliable already (jobs go back to their queue after a crash); there is no fetch class to set",
        reloader: "`bundle exec queue` wraps each job in Rails.application.reloader itself; wrap anything else in a server middleware",
        lifecycle_events: "register hooks with `config.on(:startup) { ... }`",
        strict: "queue order follows Sidekiq's rule: strict unless a queue has a weight (`queues`)",
        job_logger: "per-job lines are written by the engine; `config.logger` and `JobQueue.config.job_logs` (:text, :json, nil)",
        redis: "use `config.redis = {url: ...}`"
      }.freeze

      def initialize(config = JobQueue.config)
        @config = config
        @ignored = {}
      end

      def [](key)
        key = key.to_sym
        case key
        when :concurrency, :timeout, :labels, :tag, :environment, :error_handlers, :death_handlers then @config.public_send(key)
        when :queues then @config.queue_names
        when :require then @config.require_path || "."
        when :on_complex_arguments then @config.strict_args
        when :strict then @config.strict_order?
        when *IGNORED then @ignored.fetch(key, nil)
        when *FIXED.keys then FIXED[key]
        else refuse!(key)
        end
      end
      alias_method :fetch, :[]

      def []=(key, value)
        key = key.to_sym
        case key
        when :concurrency, :timeout, :labels, :tag, :environment then @config.public_send(:"#{key}=", value)
        when :queues then @config.queues = value
        when :require then @config.require_path = value
        when :on_complex_arguments then @config.strict_args = value
        when :error_handlers, :death_handlers then @config.public_send(key).replace(Array(value))
        when *IGNORED then @ignored[key] = value
        when *FIXED.keys
          unless value == FIXED[key]
            raise ArgumentError, "Sidekiq.options[#{key.inspect}] is fixed at #{FIXED[key]} in queue, got #{value.inspect}" \
              "#{"; #{REFUSED[key]}" if REFUSED.key?(key)}"
          end
        else refuse!(key)
        end
      end
      alias_method :store, :[]=

      def key?(key)
        self[key]
        true
      rescue ArgumentError
        false
      end

      def merge!(hash)
        hash.each { |key, value| self[key] = value }
        self
      end

      private

      def refuse!(key)
        instead = REFUSED.fetch(key) do
          "known keys: concurrency, queues, timeout, labels, tag, environment, require, error_handlers, " \
            "death_handlers, on_complex_arguments, #{(IGNORED + FIXED.keys).join(", ")}"
        end
        raise ArgumentError, "Sidekiq.options[#{key.inspect}] is not supported by queue's compat shim; #{instead}"
      end
    end
  end
end
