# frozen_string_literal: true

module JobQueue
  class Web
    module Pages
      # `/limits`: every worker with a concurrency limit, cluster-wide: its limit, the slots held
      # (jobs running, and deferred ones resumed on their way to a thread) and the jobs deferred.
      # Three HGETALLs, whatever the number of jobs.
      module Limits
        def self.routes(r)
          r.get("/limits", :limits)
        end

        def limits
          @refresh = 5
          render(:limits, title: "Limits", rows: JobQueue::Limits.stats)
        end
      end
    end
  end
end
