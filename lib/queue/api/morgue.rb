# frozen_string_literal: true

module JobQueue
  class OrderedQueue
    # An ordered queue's morgue: the ids that failed past the worker's max_retry_count, with all their
    # payloads and their last error. Paged in Redis (one page per engine call); never read whole.
    #
    #   morgue = JobQueue::OrderedQueue.new(OrderSyncWorker).morgue
    #   morgue.size
    #   morgue.page(0, 25).entries          # newest first; `sort: :id` for id order
    #   morgue.each { |entry| entry.requeue if entry.error.include?("timeout") }
    class Morgue
      include Enumerable

      SORTS = %i[updated_at id].freeze
      # Entries read per round trip by `each`.
      PAGE_SIZE = 50

      def initialize(worker)
        @worker = Ordered.worker(worker)
      end

      def size = Ordered.stats([@worker]).fetch("by_worker").values.first.fetch("morgue_length")

      # A JobQueue::Page of MorgueEntries from `offset`: the newest first (`sort: :updated_at`), or by
      # id (`sort: :id`, ascending).
      def page(offset = 0, count = 25, sort: :updated_at)
        API.count!("offset", offset)
        API.count!("count", count)
        sort = sort.to_sym
        raise ArgumentError, "unknown morgue sort #{sort.inspect}; use #{SORTS.map(&:inspect).join(" or ")}" unless SORTS.include?(sort)

        total = size
        entries = Ordered.morgue(@worker, sort: sort, descending: sort == :updated_at, offset: offset, limit: count)
          .map { |e| MorgueEntry.new(@worker, e) }
        following = offset + entries.size
        Page.new(entries, total, following < total && entries.size == count ? following : nil)
      end

      # Each entry in id order, PAGE_SIZE per round trip; safe to requeue or delete entries while
      # iterating.
      def each
        return to_enum(:each) unless block_given?

        offset = 0
        loop do
          before = size
          entries = page(offset, PAGE_SIZE, sort: :id).entries
          break if entries.empty?

          entries.each { |e| yield e }
          offset = [offset + entries.size - (before - size), 0].max
        end
      end

      # Every entry back to the queue; returns how many.
      def requeue_all = Ordered.requeue_all(@worker)

      # Every entry deleted; returns how many.
      def clear = Ordered.delete_all(@worker)

      def inspect = "#<#{self.class.name} #{@worker.name || @worker.queue_name}>"
    end

    # One morgue entry: `id`, `updated_at` (Time it died), `error` (the last), `payloads`
    # ([[payload, score], …], oldest first, decoded as the worker encodes them).
    class MorgueEntry
      attr_reader :id, :updated_at, :error, :payloads

      def initialize(worker, entry)
        @worker = worker
        @id = entry.fetch(:id)
        @updated_at = entry[:updated_at] && Time.at(entry[:updated_at])
        @error = entry[:error]
        @payloads = entry.fetch(:payloads)
      end

      # Back to the queue (merged with a queued id of the same name: due now, retry_count -1).
      # Whether it was still in the morgue.
      def requeue = Ordered.requeue(@worker, [id]) == 1

      # Removed from the morgue. Whether it was there.
      def delete = Ordered.delete(@worker, [id]) == 1

      def to_h = {"id" => id, "updated_at" => updated_at&.to_f, "error" => error, "payloads" => payloads}

      def inspect = "#<#{self.class.name} #{id} #{error.inspect}>"
    end
  end
end
