# frozen_string_literal: true

require_relative "batch_log"

module JobQueue
  module Ordered
    # One processor thread's ordered work. A fetch may take several batches of one shard's ids when
    # they run fast (the engine sizes it to about 2 ms of work); `step` runs one batch of them
    # (`batch_size` ids) through the middleware and `perform`, and once all have run, settles them
    # together with the next fetch in one engine call. The settle that could not be written (Redis
    # unreachable) is kept and written first at the next step; its ids stay in processing meanwhile,
    # so nothing else runs them.
    #
    # Each worker's shards are split over the process's threads the way Lowkiq splits them: all
    # workers' shards in one list, dealt out to the threads in turn.
    class ThreadWork
      # Ids fetched from one shard; `outcomes` (and `oldest`) of those that ran so far, in order.
      Held = Struct.new(:worker, :fetcher, :shard, :jobs, :outcomes, :oldest) do
        def ran = outcomes.size

        def unstarted = jobs.drop(ran)

        def finished? = ran >= jobs.size
      end

      def initialize(config, shards, workers, index)
        @config = config
        @shards = shards
        @workers = workers
        @index = index
        @fetchers = {}
        @held = nil
        @pending = nil
        @turn = 0
      end

      # Runs one batch if there is one; true if it did (so the caller looks for more at once).
      def step
        flush_pending
        @held ||= fetch_from_any
        return false unless @held

        held = @held
        worker = held.worker
        outcomes, oldest = run(worker, held.jobs[held.ran, worker.batch_size])
        held.outcomes.concat(outcomes)
        held.oldest.merge!(oldest)
        if held.finished?
          @held = nil
          settle(held, fetch: true)
        end
        true
      end

      # The process goes quiet: settles what ran of the ids in hand, and puts the rest back unrun (as
      # plain jobs prefetched and not started go back to their queue).
      def finish
        flush_pending
        give_back
      end

      # The thread dies of an error outside any job: writes a settle still pending, settles what ran,
      # and puts back the ids it holds that did not finish (the batch the error struck, and any not
      # started), so they run again now, not when the shard changes owner. Returns how many went back.
      def abandon
        flush_pending
        give_back
      end

      private

      # The shards of `worker` this thread fetches: Lowkiq's layout, where the shards of the workers
      # before it come first in one list dealt out to the threads.
      def shards_of(worker)
        threads = @config.concurrency
        offset = 0
        @workers.each do |w|
          break if w.equal?(worker)

          offset += @shards.owned(w.queue_name).size
        end
        @shards.thread_shards(worker.queue_name, (@index - offset) % threads, threads)
      end

      def fetcher(worker)
        @fetchers[worker] ||= @shards.fetcher(worker.queue_name, worker.shards_count, @config.ordered_scheduler.to_s, worker.batch_size)
      end

      # A batch from the first worker, in turn, that has one.
      def fetch_from_any
        @workers.size.times do
          worker = @workers[@turn % @workers.size]
          @turn += 1
          shards = shards_of(worker)
          next if shards.empty?

          batch = fetcher(worker).settle_and_fetch(nil, worker.max_retry_count, shards)[4]
          return held(worker, batch) if batch
        end
        nil
      end

      def held(worker, batch)
        shard, jobs = batch
        Held.new(worker, fetcher(worker), shard, jobs, [], {})
      end

      # Settles the ids in hand that ran and puts back those that did not; how many went back. The ids
      # stay in hand until both are written, so a call that fails (Redis unreachable) can be repeated
      # (settling again is harmless: ids settled already are skipped).
      def give_back
        held = @held
        return 0 unless held

        settle(held, fetch: false) if held.ran.positive?
        back = held.unstarted.map(&:first)
        returned = back.empty? || held.fetcher.put_back(held.shard, back)
        @held = nil
        returned ? back.size : 0
      end

      # Runs one batch of `jobs`; returns the settle entries ([id, nil] or [id, [error, retry_in]])
      # and, per id, its oldest payload (what goes to the morgue if the failure exhausts it).
      def run(worker, jobs)
        payloads_by_id = {}
        broken = {}
        jobs.each do |id, _retry_count, _perform_in, payloads|
          payloads_by_id[id] = payloads.map { |bytes, _score| worker.payload_codec.load(bytes) }
        rescue Exception => e # rubocop:disable Lint/RescueException -- any load error (Marshal raises many kinds)
          broken[id] = e
        end
        error = payloads_by_id.empty? ? nil : run_batch(worker, payloads_by_id)
        broken.each { |id, e| @config.report_error(e, context: "ordered payload of #{worker} id #{id} cannot be loaded") }
        outcomes = jobs.map do |id, retry_count, _perform_in, _payloads|
          failure = broken[id] || error
          [id, failure && [error_text(failure), retry_in(worker, retry_count + 1)]]
        end
        [outcomes, jobs.to_h { |id, _rc, _at, payloads| [id, payloads.first] }]
      end

      # Runs `perform` through the middlewares in the batch's log context, between its log lines;
      # returns the error it raised (reported in that context: worker and ids), or nil.
      def run_batch(worker, payloads_by_id)
        Logging.with_batch(worker, payloads_by_id) do
          BatchLog.around(@config) { @config.run_ordered(worker, payloads_by_id) }
          nil
        rescue Shutdown
          raise
        rescue Exception => e # rubocop:disable Lint/RescueException
          @config.report_error(e, context: "Ordered job raised exception", worker: worker.to_s, batch: payloads_by_id)
          e
        end
      end

      # Settles what ran of `batch` (with the next fetch when `fetch`).
      def settle(batch, fetch:)
        @pending = batch
        shards = fetch ? shards_for_next(batch.worker) : []
        lost, _processed, _failed, morgue_ids, next_batch = batch.fetcher.settle_and_fetch([batch.shard, batch.outcomes], batch.worker.max_retry_count, shards)
        @pending = nil
        warn_lost(batch) if lost
        exhausted(batch, morgue_ids) if morgue_ids.any?
        @held = held(batch.worker, next_batch) if next_batch
      end

      # The next batch comes with the settle when this thread serves one worker; with several, the
      # settle goes alone and the next fetch starts at the next worker, so none of them starves.
      def shards_for_next(worker)
        @workers.size == 1 ? shards_of(worker) : []
      end

      def flush_pending
        return unless @pending

        settle(@pending, fetch: false)
      end

      def exhausted(batch, morgue_ids)
        errors = batch.outcomes.to_h
        dead = morgue_ids.map do |id|
          payload, score = batch.oldest[id]
          {id: id, payloads: [[load_quietly(batch.worker, payload), score]], error: errors[id]&.first}
        end
        batch.worker.retries_exhausted(dead)
      rescue => e
        @config.report_error(e, context: "Error calling retries_exhausted of #{batch.worker}")
      end

      def load_quietly(worker, bytes)
        worker.payload_codec.load(bytes)
      rescue Exception # rubocop:disable Lint/RescueException
        bytes
      end

      def retry_in(worker, count)
        seconds = worker.retry_in(count)
        raise ArgumentError, "retry_in returned #{seconds.inspect}, not a number of seconds" unless seconds.is_a?(Numeric) && seconds.to_f.finite?

        seconds.to_f
      rescue => e
        @config.report_error(e, context: "retry_in of #{worker} failed; using the default delay")
        OrderedWorker.instance_method(:retry_in).bind_call(worker, count).to_f
      end

      # The error as the ordered_error_format writes it (a String, valid UTF-8); the class name when the
      # format raises or returns something else.
      def error_text(error)
        text = @config.ordered_error_format.call(error)
        raise TypeError, "ordered_error_format returned #{text.class}, not a String" unless text.is_a?(String)

        text.dup.force_encoding(Encoding::UTF_8).scrub
      rescue => e
        @config.report_error(e, context: "ordered_error_format failed; the error's class is stored instead")
        error.class.name.to_s
      end

      def warn_lost(batch)
        @config.logger.warn("#{batch.worker}: shard #{batch.shard} changed owner while its batch ran; the new owner runs it again")
      end
    end
  end
end
