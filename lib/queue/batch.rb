# frozen_string_literal: true

require_relative "batch/status"
require_relative "batch/callback"
require_relative "batch/set"

module JobQueue
  # A group of jobs with callbacks, in Sidekiq Pro's API (README, "Batches"):
  #
  #   batch = JobQueue::Batch.new
  #   batch.description = "Import #{file}"
  #   batch.on(:success, ImportDone, "file" => file)
  #   batch.jobs { rows.each { |row| ImportRow.perform_async(row) } }
  #
  # Every push inside `jobs` joins the batch (its job carries "bid"); the engine counts each job in
  # the same atomic step that acknowledges it, files it for retry or kills it, and pushes the
  # callback job the moment a count completes the batch (batch/ in the engine).
  class Batch
    # Raised for a batch used in a way it cannot be.
    class Error < JobQueue::Error; end

    EVENTS = %w[complete success death].freeze
    CURRENT = :jq_batch_current
    RUNNING = :jq_batch_running_bid
    private_constant :CURRENT

    attr_reader :bid, :parent_bid, :callbacks
    attr_accessor :description, :callback_queue
    # Seconds the batch's data is kept (JobQueue.config.batch_expiry unless set).
    attr_accessor :expires_in

    # The batch whose `jobs` block runs on this thread, if any.
    def self.current
      Thread.current[CURRENT]
    end

    # The bid of the batch job running on this thread, if any.
    # @api private
    def self.running_bid
      Thread.current[RUNNING]
    end

    # @api private
    def self.running(bid)
      previous = Thread.current[RUNNING]
      Thread.current[RUNNING] = bid
      yield
    ensure
      Thread.current[RUNNING] = previous
    end

    # `Batch.new` makes a new batch (a child of the batch whose `jobs` block is running, if any);
    # `Batch.new(bid)` reopens an existing one, to add jobs.
    def initialize(bid = nil, config: JobQueue.config)
      @config = config
      @callbacks = Hash.new { |h, k| h[k] = [] }
      if bid
        @bid = bid.to_s
        @existing = true
        status = Status.new(@bid, config: config)
        raise Error, "no batch #{@bid.inspect} (never created, or expired)" unless status.exists?

        @description = status.description
        @parent_bid = status.parent_bid
      else
        @bid = SecureRandom.urlsafe_base64(10)
        @existing = false
        @parent_bid = Batch.current&.bid
      end
    end

    # Registers a callback: `on(:success, MyCallback, "to" => email)` calls
    # `MyCallback.new.on_success(status, options)`; `"Class#method"` names the method.
    def on(event, target, options = {})
      event = event.to_s
      raise ArgumentError, "unknown batch event #{event.inspect}: use one of #{EVENTS.join(", ")}" unless EVENTS.include?(event)
      raise Error, "callbacks are set before the batch's first jobs block" if @existing

      name = target.is_a?(Class) ? target.name : target.to_s
      raise ArgumentError, "a batch callback needs a named class or \"Class#method\", got #{target.inspect}" if name.nil? || name.empty?
      raise ArgumentError, "batch callback options must be a Hash of JSON values" unless options.is_a?(Hash)

      @callbacks[event] << [name, JSON.parse(JSON.generate(options))]
      self
    end

    # Runs the block; every job pushed inside it joins this batch. The first call creates the batch;
    # callbacks cannot fire before the block ends. An empty block on a new batch creates a batch with
    # no jobs, whose `complete` and `success` callbacks fire at once (README, "Batches").
    def jobs
      raise ArgumentError, "Batch#jobs needs a block" unless block_given?

      hold = !(@existing && Batch.running_bid == @bid)
      opened = engine.batch_open(@bid, @existing ? nil : creation, hold)
      raise Error, "no batch #{@bid.inspect} (never created, or expired)" unless opened

      @existing = true
      previous = Thread.current[CURRENT]
      Thread.current[CURRENT] = self
      begin
        yield
      ensure
        Thread.current[CURRENT] = previous
      end
      # Only a block that ended normally lets the batch go: one that raised leaves it open, so its
      # callbacks never fire for a half-filled batch.
      engine.batch_close(@bid) if hold
      self
    end

    # Marks the batch invalid: its jobs not yet started are skipped (acknowledged without running,
    # within a second in every server), and it fires no further callbacks.
    def invalidate_all
      engine.batch_invalidate(@bid)
    end

    def valid?
      engine.batch_valid(@bid)
    end

    def status
      Status.new(@bid, config: @config)
    end

    # Jobs pushed so far.
    def total
      status.total
    end

    private

    def engine
      @config.engine
    end

    def creation
      queue = (@callback_queue || "default").to_s
      expiry = Integer(@expires_in || @config.batch_expiry)
      raise ArgumentError, "a batch's expires_in must be positive" unless expiry.positive?

      [@description.to_s, queue, JSON.generate(@callbacks), @callbacks.keys, @parent_bid, expiry]
    end
  end
end
