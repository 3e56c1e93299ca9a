# frozen_string_literal: true

require_relative "ordered_worker"
require_relative "ordered/settings"
require_relative "ordered/server"

module JobQueue
  # The read side and the dashboard's actions for ordered workers (Lowkiq's `/api/v1/stats` and its
  # morgue buttons). A worker is given as its module (or class), its name, or its queue name; the
  # "all workers" actions take every ordered worker of the app (`workers`) when none is given.
  #
  #   JobQueue::Ordered.stats          # => {"total" => {"length", "morgue_length", "lag"}, "by_worker" => {...}}
  #   JobQueue::Ordered.morgue(OrderSyncWorker, sort: :updated_at, descending: true, limit: 20)
  #   JobQueue::Ordered.requeue(OrderSyncWorker, ["42"])
  module Ordered
    SORTS = {id: "id", updated_at: "updated_at", time: "updated_at"}.freeze

    class << self
      # A callable run before every listing of the ordered workers (`workers`, and so `stats`, the
      # dashboard, `queue ordered`, the server), to load the app's code first: the listing then does
      # not depend on which classes autoloading happened to load. In a Rails app the Railtie sets it
      # (the app is eager-loaded once, and again after a code reload); nil, the default, loads nothing.
      attr_reader :loader

      def loader=(callable)
        raise ArgumentError, "JobQueue::Ordered.loader must respond to call (or be nil), got #{callable.inspect}" unless callable.nil? || callable.respond_to?(:call)

        @loader = callable
      end
    end

    module_function

    # Lowkiq's stats document: `length` (queued ids), `morgue_length`, `lag` (seconds the oldest due id
    # is late) per worker and in total. One round trip.
    def stats(workers = self.workers)
      rows = workers.map { |w| worker(w) }.map { |w| [w.name || w.queue_name, w.queue_name, w.shards_count] }
      JSON.parse(engine.ordered_stats(rows))
    end

    # A page of the morgue, sorted by id or by the time each entry got there (`sort: :updated_at`):
    # `[{id:, updated_at:, error:, payloads: [[payload, score], …]}, …]`.
    def morgue(worker, sort: :id, descending: false, offset: 0, limit: 100)
      w = worker(worker)
      order = SORTS.fetch(sort.to_sym) { raise ArgumentError, "unknown morgue sort #{sort.inspect}; use :id or :updated_at" }
      raise ArgumentError, "offset and limit must be non-negative Integers" unless [offset, limit].all? { |n| n.is_a?(Integer) && n >= 0 }

      engine.ordered_morgue(w.queue_name, w.shards_count, order, descending ? true : false, offset, limit).map do |id, at, error, payloads|
        {id: id, updated_at: at, error: error, payloads: payloads.map { |bytes, score| [w.payload_codec.load(bytes), score] }}
      end
    end

    # Morgue entries back to the queue (merged with a queued id: due now, retry_count -1).
    def requeue(worker, ids) = admin(worker, "requeue", ids)

    # Morgue entries deleted.
    def delete(worker, ids) = admin(worker, "delete", ids)

    def requeue_all(worker) = admin(worker, "requeue_all")

    def delete_all(worker) = admin(worker, "delete_all")

    # Every queued id due now.
    def perform_all_jobs_now(worker = nil) = each_worker(worker, "perform_all_jobs_now")

    # Queued ids that have failed at least once go to the morgue, whole.
    def kill_all_failed_jobs(worker = nil) = each_worker(worker, "kill_all_failed_jobs")

    # Queued ids that have failed at least once are deleted.
    def delete_all_failed_jobs(worker = nil) = each_worker(worker, "delete_all_failed_jobs")

    # Ordered workers that have a queue name, once `loader` has loaded the app's code.
    def workers
      Ordered.loader&.call
      OrderedWorker.workers.select { |w| w.name || w.instance_variable_get(:@queue_name) }
    end

    # A worker from its module, its name or its queue name.
    def worker(ref)
      return ref if ref.is_a?(Module) && ref.is_a?(OrderedWorker)

      name = ref.to_s
      workers.find { |w| w.name == name } || workers.find { |w| w.queue_name == name } ||
        raise(ArgumentError, "no ordered worker named #{name.inspect} is loaded (known: #{workers.map { |w| w.name || w.queue_name }.join(", ")})")
    end

    def admin(worker, action, ids = [])
      w = worker(worker)
      engine.ordered_admin(w.queue_name, w.shards_count, action, Array(ids).map(&:to_s))
    end

    def each_worker(worker, action)
      (worker ? [worker] : workers).sum { |w| admin(w, action) }
    end

    def engine = JobQueue.engine
  end
end
