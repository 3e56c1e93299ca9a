# frozen_string_literal: true

module JobQueue
  # Sidekiq 6.4's lifecycle hooks, on the configuration:
  #
  #   JobQueue.configure_server do |config|
  #     config.on(:startup) { ActiveRecord::Base.connection_pool.disconnect! }
  #     config.on(:shutdown) { Metrics.flush }
  #   end
  #
  # A server fires each event once, as Sidekiq's `fire_event` does: :startup before the processor
  # threads start (an error there aborts the start), :heartbeat after the process first registered in
  # Redis, :quiet when it stops taking jobs (TSTP, or the start of a stop), :shutdown when it stops.
  # :quiet and :shutdown run their blocks last-registered first. An error in any other event is
  # reported to the error handlers and the remaining blocks still run.
  module Lifecycle
    EVENTS = %i[startup quiet shutdown heartbeat].freeze

    # Registers a block for `event`; raises ArgumentError (as Sidekiq.on) for anything but a Symbol
    # naming one of EVENTS.
    def on(event, &block)
      raise ArgumentError, "Symbols only please: #{event}" unless event.is_a?(Symbol)
      raise ArgumentError, "Invalid event name: #{event}; use one of #{EVENTS.map(&:inspect).join(", ")}" unless EVENTS.include?(event)
      raise ArgumentError, "on(#{event.inspect}) needs a block" unless block

      lifecycle_events[event] << block
      self
    end

    # @api private: runs and forgets the blocks of `event`.
    def fire_event(event, reverse: false, reraise: false)
      blocks = lifecycle_events[event].dup
      lifecycle_events[event].clear
      blocks.reverse! if reverse
      blocks.each do |block|
        block.call
      rescue => e
        report_error(e, context: "Exception during lifecycle event.", event: event)
        raise if reraise
      end
      nil
    end

    private

    def lifecycle_events
      @lifecycle_events ||= EVENTS.to_h { |event| [event, []] }
    end
  end
end
