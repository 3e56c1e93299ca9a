# frozen_string_literal: true

module JobQueue
  class Web
    module Pages
      # `/dedup`: the idempotency keys held now (a job with these arguments is queued or running, so
      # a duplicate push is dropped), with their time to live.
      module Dedup
        def self.routes(r)
          r.get("/dedup", :dedup)
        end

        def dedup
          paging = Paging.new(params)
          keys = Data.dedup_keys(paging.offset, paging.per)
          render(:dedup, title: "Deduplication", keys: keys, paging: paging)
        end
      end
    end
  end
end
