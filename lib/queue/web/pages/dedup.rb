# frozen_string_literal: true

module JobQueue
  class Web
    module Pages
      # `/dedup`: the idempotency keys held now (a job with these arguments is queued or running, so
      # a duplicate push is dropped), with their time to live, and a button to release one by hand.
      # Redis indexes them nowhere, so the page is one SCAN step (`?cursor=`, `?count=` keys examined (1 to 1000),
      # `?queue=` to match one queue's keys): its cost is bounded by the count, never by the keys held.
      module Dedup
        COUNTS = [100, 500, 1000].freeze

        def self.routes(r)
          r.get("/dedup", :dedup)
          r.post("/dedup/delete", :dedup_delete)
        end

        def dedup
          scan = dedup_scan
          render(:dedup, title: "Deduplication", **scan)
        end

        def dedup_delete
          key = params["key"].to_s
          return redirect("/dedup", "No key was given.") if key.empty?

          released = Data.dedup_release(key, params["jid"].to_s.empty? ? nil : params["jid"].to_s)
          redirect("/dedup", released ? "Released #{key}." : "#{key} was no longer held by that job.")
        rescue ArgumentError => e
          redirect("/dedup", e.message)
        end

        private

        # {cursor:, count:, queue:, step:} for the request's scan parameters.
        def dedup_scan
          cursor = params["cursor"].to_s.match?(/\A\d+\z/) ? params["cursor"].to_i : 0
          count = params["count"].to_i.between?(1, IdempotencyKeys::MAX_COUNT) ? params["count"].to_i : COUNTS.first
          queue = params["queue"].to_s.strip
          queue = nil if queue.empty?
          {cursor: cursor, count: count, queue: queue, step: Data.dedup_keys(cursor, count, queue)}
        end
      end
    end
  end
end
