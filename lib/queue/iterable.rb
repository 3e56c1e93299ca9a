# frozen_string_literal: true

require_relative "iterable/state"
require_relative "iterable/enumerators"

module JobQueue
  # Sidekiq 7.3's Sidekiq::Job::Iterable: instead of `perform`, a job defines
  # `build_enumerator(*args, cursor:)` and `each_iteration(item, *args)`. The cursor goes to the job's
  # `it-<jid>` hash (iterable/state.rb) every STATE_FLUSH_INTERVAL seconds, and at once when the
  # server stops: the job then leaves between two items with Interrupted, which the processor answers
  # by pushing the job back to its queue, and its next run builds its enumerator from the saved cursor.
  # Included through JobQueue::IterableJob (Sidekiq::IterableJob under the compat shim).
  module Iterable
    include Enumerators

    # Raised by an iterable job that stopped because its server is stopping; the processor re-queues it.
    class Interrupted < ::RuntimeError; end

    # Seconds between two writes of the state while iterating (Sidekiq's, also how often `cancel!` is
    # noticed).
    STATE_FLUSH_INTERVAL = 5
    STATE_TTL = State::TTL

    def self.included(base)
      raise ArgumentError, "#{name} must be included in a class" unless base.is_a?(Class)

      base.extend(ClassMethods)
    end

    # @api private
    module ClassMethods
      # The module's `perform` drives the iteration; a class of its own would bypass it.
      def method_added(name)
        if name == :perform
          raise ArgumentError, "#{self} is an iterable job and must not define #perform: define " \
            "build_enumerator(*args, cursor:) and each_iteration(item, *args)"
        end
        super
      end
    end

    def initialize(*)
      super
      @_executions = 0
      @_cursor = nil
      @_runtime = 0.0
      @_start_time = nil
      @_args = nil
      @_cancelled = nil
      @current_object = nil
    end

    # The item being (or last) iterated; kept for the callbacks after the loop (Sidekiq 8).
    attr_reader :current_object

    # The job's arguments, frozen.
    def arguments
      @_args
    end

    # The cursor of the current item (Sidekiq 8).
    def cursor
      @_cursor.freeze
    end

    # Marks this job cancelled in its `it-<jid>` hash and returns the epoch second it was. Cancellation
    # is asynchronous: a running job notices it at its next state write (within
    # STATE_FLUSH_INTERVAL), a queued one when it starts. JobQueue::Client#cancel!(jid) does the same
    # from outside the job.
    def cancel!
      return @_cancelled if cancelled?

      @_cancelled = State.cancel!(jid)
    end

    def cancelled?
      @_cancelled
    end

    # Callbacks to override. on_start runs before the first run's first item, on_resume before a later
    # run's; on_stop after every run's loop (finished, interrupted or cancelled); on_complete when the
    # iteration is over (finished or cancelled); on_cancel when it was cancelled (Sidekiq 8).
    def on_start; end

    def on_resume; end

    def on_stop; end

    def on_cancel; end

    def on_complete; end

    # Wraps each `each_iteration` call.
    def around_iteration
      yield
    end

    def build_enumerator(*)
      raise NotImplementedError, "#{self.class.name} must implement a '#build_enumerator' method"
    end

    def each_iteration(*)
      raise NotImplementedError, "#{self.class.name} must implement an '#each_iteration' method"
    end

    def iteration_key
      State.key(jid)
    end

    # @api private: the processor calls this with the job's arguments.
    def perform(*args)
      @_args = args.dup.freeze
      resume_state
      @_executions += 1
      @_start_time = monotonic

      enumerator = build_enumerator(*args, cursor: @_cursor)
      return logger.info("'#build_enumerator' returned nil, skipping the job.") if enumerator.nil?

      check_enumerator!(enumerator)
      (@_executions == 1) ? on_start : on_resume

      outcome = catch(:abort) { iterate(enumerator, args) }
      on_stop
      return interrupt! unless finished?(outcome)

      on_complete
      finish
    end

    private

    def resume_state
      progress = State.load(jid) or return

      @_executions = progress.executions
      @_cursor = progress.cursor
      @_runtime = progress.runtime
    end

    # true: the iteration is over (every item, or cancelled); false: interrupted.
    def iterate(enumerator, args)
      return cancelled_now if (@_cancelled = State.cancelled(jid))

      shutdown_timeout = JobQueue.config.timeout
      flushed_at = monotonic
      any = false
      enumerator.each do |item, item_cursor|
        any = true
        @_cursor = item_cursor
        @current_object = item

        stopping = interrupted?
        if stopping || monotonic - flushed_at >= STATE_FLUSH_INTERVAL
          cancelled = flush_state
          flushed_at = monotonic
          return cancelled_now if cancelled
        end
        return false if stopping

        run_item(item, args, shutdown_timeout)
      end
      logger.debug("Enumerator found nothing to iterate!") unless any
      true
    ensure
      @_runtime += monotonic - @_start_time
    end

    def cancelled_now
      @_cancelled = true
      on_cancel
      logger.info { "Job cancelled" }
      true
    end

    # One item, under around_iteration. A failure saves the cursor first (as Sidekiq 8 does), so the
    # retry starts at the failed item rather than at the last periodic write.
    def run_item(item, args, shutdown_timeout)
      started = monotonic
      begin
        around_iteration { each_iteration(item, *args) }
      rescue Exception # rubocop:disable Lint/RescueException
        @_runtime += monotonic - @_start_time
        @_start_time = monotonic
        flush_state
        raise
      end
      took = monotonic - started
      return if took <= shutdown_timeout

      logger.warn { format("Iteration took longer (%.2f) than the shutdown timeout (%d). This can lead to job processing problems during deploys", took, shutdown_timeout) }
    end

    def finished?(outcome)
      case outcome
      when true, nil then true # nil: `throw :abort` ends the iteration, on_complete still runs
      when false then false
      else raise ArgumentError, "Unexpected thrown value: #{outcome.inspect}"
      end
    end

    # Saves the cursor and leaves; the processor pushes the job back to its queue.
    def interrupt!
      flush_state
      logger.debug { "Interrupting job (cursor=#{@_cursor.inspect})" }
      raise Interrupted, "#{self.class.name} #{jid} interrupted at cursor #{@_cursor.inspect}: the server is stopping"
    end

    # Writes the state; returns the "cancelled" field.
    def flush_state
      State.save(jid, State::Progress.new(@_executions, @_cursor, @_runtime))
    end

    def finish
      logger.debug { format("Completed iteration. executions=%d runtime=%.3f", @_executions, @_runtime) }
      State.delete(jid)
    end

    def check_enumerator!(enumerator)
      return if enumerator.is_a?(Enumerator)

      raise ArgumentError, <<~MSG
        #build_enumerator must return an Enumerator, but returned #{enumerator.class}.
        Example:
          def build_enumerator(shop_id, cursor:)
            active_record_records_enumerator(Shop.find(shop_id).products, cursor: cursor)
          end
      MSG
    end

    def monotonic
      ::Process.clock_gettime(::Process::CLOCK_MONOTONIC)
    end
  end
end
