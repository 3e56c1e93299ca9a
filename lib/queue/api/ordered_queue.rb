# frozen_string_literal: true

require_relative "ordered_shard"
require_relative "morgue"

module JobQueue
  # An ordered worker's queue (Lowkiq's model, JobQueue::OrderedWorker) as an operator sees it:
  # its numbers, each shard with its length, lag and lease owner, and its morgue.
  #
  #   JobQueue::OrderedQueue.all.map { |q| [q.name, q.size, q.lag, q.morgue.size] }
  #   JobQueue::OrderedQueue.new(OrderSyncWorker).shards.map { |s| [s.index, s.owner, s.lease_expires_at] }
  #   JobQueue::OrderedQueue.new("OrderSyncWorker").morgue.page(0, 20).each(&:requeue)
  #
  # Ordered queues are known from the loaded ordered workers (Redis keeps no list of them, as Lowkiq
  # keeps none): run this where the app is loaded. Every call is one engine call, bounded by the number
  # of shards or the page asked for.
  class OrderedQueue
    # Every loaded ordered worker's queue.
    def self.all = Ordered.workers.map { |w| new(w) }

    attr_reader :worker

    # `worker`: the worker module, its name, or its queue name.
    def initialize(worker)
      @worker = Ordered.worker(worker)
    end

    # The worker's name (its queue name for an anonymous one): the key of Lowkiq's stats document.
    def name = worker.name || worker.queue_name

    def queue_name = worker.queue_name

    def shards_count = worker.shards_count

    # Pausing, as for plain queues (JobQueue::Queue#pause!): one set of paused names, by queue_name.
    def paused? = Queue.new(queue_name).paused?

    def pause! = Queue.new(queue_name).pause!

    def unpause! = Queue.new(queue_name).unpause!

    # Lowkiq's numbers for this queue: {"length", "morgue_length", "lag"}, read now.
    def stats = Ordered.stats([worker]).fetch("by_worker").fetch(name)

    # Queued ids (not those running).
    def size = stats.fetch("length")
    alias_method :length, :size

    # Seconds the oldest due id is late; 0 when none is due.
    def lag = stats.fetch("lag")

    # Every shard, in order, read in one round trip: JobQueue::OrderedShard.
    def shards
      API.engine.ordered_shards(queue_name, shards_count).map { |row| OrderedShard.from_engine(row) }
    end

    def morgue = Morgue.new(worker)

    # Every queued id due now.
    def perform_all_jobs_now = Ordered.perform_all_jobs_now(worker)

    # Queued ids that have failed at least once go to the morgue, whole.
    def kill_all_failed_jobs = Ordered.kill_all_failed_jobs(worker)

    # Queued ids that have failed at least once are deleted.
    def delete_all_failed_jobs = Ordered.delete_all_failed_jobs(worker)

    def ==(other) = other.is_a?(OrderedQueue) && other.queue_name == queue_name
    alias_method :eql?, :==

    def hash = queue_name.hash

    def inspect = "#<#{self.class.name} #{name} (#{shards_count} shards)>"
  end
end
