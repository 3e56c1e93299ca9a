# frozen_string_literal: true

module JobQueue
  module Ordered
    # Server settings for ordered workers, on JobQueue.config:
    #
    #   JobQueue.configure_server do |c|
    #     c.ordered_server_middlewares << ->(worker, batch, &block) { Rails.application.reloader.wrap(&block) }
    #     c.ordered_scheduler = :seq          # :lag (default) or :seq
    #     c.ordered_splitter = :by_node       # :balanced (default), :default, :by_node
    #     c.on_server_init = -> { ActiveRecord::Base.establish_connection }
    #     c.last_words = ->(error) { Bugsnag.notify(error) if error }
    #   end
    #
    # `:by_node` reads QUEUE_NUMBER_OF_NODES and QUEUE_NODE_NUMBER (and is chosen by default when they
    # are set), as Lowkiq's LOWKIQ_* variables.
    module Settings
      SCHEDULERS = %i[lag seq].freeze
      SPLITTERS = %i[balanced default by_node].freeze

      attr_reader :on_server_init, :last_words

      # Callables `(worker, batch, &block)` wrapped around every ordered `perform`, first outermost.
      def ordered_server_middlewares
        @ordered_server_middlewares ||= []
      end

      # Runs `worker.perform(batch)` inside the ordered server middlewares, the first outermost (as a
      # server does, and the test modes).
      def run_ordered(worker, batch)
        chain = ordered_server_middlewares
        call = lambda do |i|
          return worker.perform(batch) if i == chain.size

          chain[i].call(worker, batch) { call.call(i + 1) }
        end
        call.call(0)
      end

      def ordered_scheduler
        @ordered_scheduler || :lag
      end

      def ordered_scheduler=(name)
        raise ArgumentError, "ordered_scheduler must be one of #{SCHEDULERS.inspect}, got #{name.inspect}" unless SCHEDULERS.include?(name&.to_sym)

        @ordered_scheduler = name.to_sym
      end

      def ordered_splitter
        @ordered_splitter || (ENV["QUEUE_NUMBER_OF_NODES"] ? :by_node : :balanced)
      end

      def ordered_splitter=(name)
        raise ArgumentError, "ordered_splitter must be one of #{SPLITTERS.inspect}, got #{name.inspect}" unless SPLITTERS.include?(name&.to_sym)

        @ordered_splitter = name.to_sym
      end

      # How a failed batch's error is written into its ids' `error` (what the morgue and
      # `retries_exhausted` show): a callable `(error) -> String`, by default "Class: message".
      # Lowkiq's `format_error` (whose default is the message alone).
      def ordered_error_format
        @ordered_error_format || DEFAULT_ERROR_FORMAT
      end

      def ordered_error_format=(callable)
        raise ArgumentError, "ordered_error_format must respond to call(error), got #{callable.inspect}" unless callable.respond_to?(:call)

        @ordered_error_format = callable
      end

      DEFAULT_ERROR_FORMAT = ->(error) { "#{error.class}: #{error.message}" }

      # Seconds an idle processor thread waits before it looks for ordered work again.
      def ordered_poll_interval
        @ordered_poll_interval || 0.2
      end

      def ordered_poll_interval=(seconds)
        raise ArgumentError, "ordered_poll_interval must be a positive number of seconds, got #{seconds.inspect}" unless seconds.is_a?(Numeric) && seconds.positive?

        @ordered_poll_interval = seconds
      end

      # Called once in a server before its threads start (Lowkiq's `on_server_init`).
      def on_server_init=(callable)
        raise ArgumentError, "on_server_init must respond to call, got #{callable.inspect}" unless callable.nil? || callable.respond_to?(:call)

        @on_server_init = callable
      end

      # Called once when the server stops (Lowkiq's `last_words`): with the StandardError that stopped
      # it (raised outside any job), or with nil when a signal stopped it.
      def last_words=(callable)
        raise ArgumentError, "last_words must respond to call, got #{callable.inspect}" unless callable.nil? || callable.respond_to?(:call)

        @last_words = callable
      end

      # @api private: what the engine's splitter argument is.
      def ordered_splitter_spec
        return ordered_splitter.to_s unless ordered_splitter == :by_node

        nodes = Integer(ENV.fetch("QUEUE_NUMBER_OF_NODES") { raise ArgumentError, "the by_node splitter needs QUEUE_NUMBER_OF_NODES" })
        node = Integer(ENV.fetch("QUEUE_NODE_NUMBER") { raise ArgumentError, "the by_node splitter needs QUEUE_NODE_NUMBER" })
        raise ArgumentError, "QUEUE_NODE_NUMBER must be from 0 to QUEUE_NUMBER_OF_NODES - 1 (#{nodes - 1}), got #{node}" unless nodes.positive? && node.between?(0, nodes - 1)

        ["by_node", nodes, node]
      end
    end
  end

  Configuration.include(Ordered::Settings)
end
