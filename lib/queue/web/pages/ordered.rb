# frozen_string_literal: true

module JobQueue
  class Web
    module Pages
      # `/ordered` and `/ordered/WORKER`: ordered workers' length, lag and morgue (JobQueue::Ordered),
      # each shard with its length, lag and lease owner (JobQueue::OrderedQueue#shards), the morgue a
      # page at a time, and requeue or delete of morgue entries.
      module Ordered
        ACTIONS = %w[requeue delete].freeze

        def self.routes(r)
          r.get("/ordered", :ordered)
          r.get("/ordered/:worker", :ordered_morgue)
          r.post("/ordered/:worker/:action", :ordered_action)
        end

        def ordered
          render(:ordered, title: "Ordered queues", stats: Data.ordered_stats, queues: Data.ordered_queues)
        end

        def ordered_morgue
          worker = ordered_worker or return not_found
          name = params["worker"]
          total = Data.ordered_stats.dig("by_worker", name, "morgue_length")
          paging = Paging.new(params, total: total)
          sort = params["sort"] == "id" ? :id : :updated_at
          entries = JobQueue::Ordered.morgue(worker, sort: sort, descending: sort == :updated_at,
            offset: paging.offset, limit: paging.per)
          render(:morgue, title: "#{name} morgue", name: name, worker: worker, entries: entries, paging: paging, sort: sort)
        end

        def ordered_action
          worker = ordered_worker or return not_found
          action = params["action"].to_s
          all = action.end_with?("_all")
          verb = action.delete_suffix("_all")
          return not_found unless ACTIONS.include?(verb)

          ids = Array(params["ids"]).map(&:to_s).reject(&:empty?)
          return redirect("/ordered/#{Rack::Utils.escape_path(params["worker"])}", "No entry was checked.") if ids.empty? && !all

          done = all ? JobQueue::Ordered.public_send(:"#{verb}_all", worker) : JobQueue::Ordered.public_send(verb, worker, ids)
          redirect("/ordered/#{Rack::Utils.escape_path(params["worker"])}",
            "#{verb == "requeue" ? "Requeued" : "Deleted"} #{done} morgue entr#{done == 1 ? "y" : "ies"}.")
        end

        private

        def ordered_worker
          JobQueue::Ordered.worker(params["worker"])
        rescue ArgumentError
          nil
        end
      end
    end
  end
end
