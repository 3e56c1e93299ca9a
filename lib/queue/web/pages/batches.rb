# frozen_string_literal: true

module JobQueue
  class Web
    module Pages
      # `/batches`: the batches whose data has not expired, newest first, each with its progress; and
      # `/batches/<bid>`: one batch's counts, its failed jobs and the callbacks fired (JobQueue::Batch).
      # A page reads its 25 batches (three HGETALLs each), whatever the number kept.
      module Batches
        PER_PAGE = 25

        def self.routes(r)
          r.get("/batches", :batches)
          r.get("/batches/:bid", :batch)
        end

        def batches
          number = [params["page"].to_i, 1].max
          set = JobQueue::BatchSet.new
          render(:batches, title: "Batches", statuses: set.page((number - 1) * PER_PAGE, PER_PAGE), page_no: number, total: set.size)
        end

        def batch
          status = JobQueue::Batch::Status.new(params["bid"])
          return not_found unless status.exists?

          render(:batch, title: "Batch #{status.bid}", batch_status: status)
        end
      end
    end
  end
end
