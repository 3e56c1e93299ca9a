# frozen_string_literal: true

module JobQueue
  module Testing
    # The test modes for ordered workers (JobQueue::OrderedWorker). `perform_async` validates and
    # serializes the jobs as it does for Redis, then
    #
    # - fake mode keeps them in memory: `OrderSyncWorker.jobs` (`[{id:, payload:, score:, perform_in:}]`,
    #   payloads as the worker will get them), `.drain`, `.clear`;
    # - inline mode runs them at once.
    #
    # Either way `perform` gets what a server would hand it: each id's payloads merged (identical
    # payloads once) and oldest (lowest score) first, ids in the order they became due,
    # `batch_size` ids per call, inside `config.ordered_server_middlewares`. Exceptions reach the
    # caller; there are no retries.
    module Ordered
      @rows = Hash.new { |hash, worker| hash[worker] = [] }
      @lock = Mutex.new

      class << self
        # The payloads_by_id Hashes a server would pass to `worker.perform` for these rows
        # ([id, payload bytes, score, perform_in], as Ordered::Client.rows makes them).
        def batches(worker, rows)
          ids = {}
          rows.each do |id, bytes, score, perform_in|
            entry = ids[id] ||= {perform_in: perform_in, payloads: {}} # a queued id keeps its perform_in
            known = entry[:payloads][bytes]
            entry[:payloads][bytes] = known.nil? || score < known ? score : known
          end
          due = ids.each_with_index.sort_by { |(_id, entry), index| [entry[:perform_in], index] }.map(&:first)
          due.each_slice(worker.batch_size).map do |slice|
            slice.to_h do |id, entry|
              payloads = entry[:payloads].sort_by { |bytes, score| [score, bytes] }
              [id, payloads.map { |bytes, _score| worker.payload_codec.load(bytes.dup) }]
            end
          end
        end

        # Runs every batch of the rows, in order.
        def run(worker, rows)
          batches(worker, rows).each { |payloads_by_id| JobQueue.config.run_ordered(worker, payloads_by_id) }
        end

        # Fake mode: keeps the rows; returns how many of their ids were not held before.
        def push(worker, rows)
          @lock.synchronize do
            held = @rows[worker]
            before = held.map(&:first).uniq
            held.concat(rows)
            (rows.map(&:first).uniq - before).size
          end
        end

        # The fake rows of one worker (a copy).
        def rows(worker)
          @lock.synchronize { @rows[worker].dup }
        end

        # Takes every fake row of one worker out.
        def take(worker)
          @lock.synchronize { @rows.delete(worker) || [] }
        end

        def clear(worker)
          take(worker)
          nil
        end

        def clear_all
          @lock.synchronize { @rows.clear }
        end
      end

      # Prepended to Ordered::Client's `push` (the one behind every ordered `perform_async`).
      module Client
        def push(worker, jobs, **options)
          return super if Testing.disabled?

          rows = rows(worker, jobs)
          return Ordered.push(worker, rows) if Testing.fake?

          Ordered.run(worker, rows)
          rows.map(&:first).uniq.size
        end
      end

      # Fake mode's API on ordered workers.
      module WorkerMethods
        # This worker's fake jobs, oldest first: `[{id:, payload:, score:, perform_in:}]` (ids as
        # Strings, payloads after their serialization, as `perform` will get them).
        def jobs
          Ordered.rows(self).map do |id, bytes, score, perform_in|
            {id: id, payload: payload_codec.load(bytes.dup), score: score, perform_in: perform_in}
          end
        end

        # Runs this worker's fake jobs, merged and batched as a server would, until none is left
        # (including jobs `perform` pushes).
        def drain
          until (rows = Ordered.take(self)).empty?
            Ordered.run(self, rows)
          end
        end

        def clear
          Ordered.clear(self)
        end
      end
    end
  end

  JobQueue::Ordered::Client.singleton_class.prepend(Testing::Ordered::Client)
  OrderedWorker.include(Testing::Ordered::WorkerMethods)
end
