# frozen_string_literal: true

module JobQueue
  class Web
    module Pages
      # The JSON API, read-only: what each page shows, for scripts and monitors. `/api/v1/stats` is
      # Lowkiq's document (ordered workers), unchanged, so Lowkiq's clients keep working.
      module Api
        def self.routes(r)
          r.get("/api/v1/stats", :api_stats)
          r.get("/api/v1/dashboard", :api_dashboard)
          r.get("/api/v1/queues", :api_queues)
          r.get("/api/v1/queues/:name", :api_queue)
          r.get("/api/v1/busy", :api_busy)
          Sets::KINDS.each_key do |kind|
            r.get("/api/v1/#{kind}", :api_set, {"kind" => kind})
            r.get("/api/v1/#{kind}/:key", :api_set_entry, {"kind" => kind})
          end
          r.get("/api/v1/ordered", :api_ordered)
          r.get("/api/v1/ordered/:worker/morgue", :api_morgue)
          r.get("/api/v1/dedup", :api_dedup)
        end

        def api_stats = json(Data.ordered_stats)

        def api_dashboard
          days = params["days"].to_i.clamp(1, 365).then { |d| params["days"] ? d : 30 }
          json(Data.stats.merge("history" => Data.history(days).transform_values(&:to_h)))
        end

        def api_queues = json(Data.queues.map { |q| queue_json(q) })

        def api_queue
          info = Data.queue(params["name"])
          paging = Paging.new(params, total: info[:size])
          json(queue_json(info).merge(page_json(paging), "jobs" => Data.queue_page(params["name"], paging.offset, paging.per).map(&:item)))
        end

        def api_busy
          json({"processes" => Data.processes, "busy" => Data.work_size,
                "work" => Data.work.map { |identity, thread, work| {"identity" => identity, "thread" => thread, "work" => work} }})
        end

        def api_set
          kind = params["kind"]
          filter = params["q"].to_s.strip
          paging = Paging.new(params)
          offset = filter.empty? ? paging.offset : [params["from"].to_i, 0].max
          result = Data.set_page(kind, offset, paging.per, filter)
          json({"page" => filter.empty? ? paging.page : nil, "per" => paging.per, "total" => result.total,
                "next_offset" => result.next_offset, "entries" => result.entries.map { |e| entry_json(e) }})
        end

        def api_set_entry
          entry = Data.set_entry(params["kind"], params["key"])
          entry ? json(entry_json(entry)) : json({"error" => "no such entry"}, status: 404)
        end

        def api_morgue
          worker = ordered_worker or return json({"error" => "no such ordered worker"}, status: 404)
          paging = Paging.new(params)
          sort = params["sort"] == "id" ? :id : :updated_at
          entries = JobQueue::Ordered.morgue(worker, sort: sort, descending: sort == :updated_at, offset: paging.offset, limit: paging.per)
          json(page_json(paging).merge("entries" => entries))
        end

        # Each ordered queue with its numbers and its shards (length, lag, busy, owner, lease expiry).
        def api_ordered = json({"queues" => Data.ordered_queues})

        # One SCAN step of the idempotency keys held: `?cursor=` (0 to start), `?count=`, `?queue=`;
        # continue from `next_cursor` until it is 0.
        def api_dedup
          scan = dedup_scan
          step = scan[:step]
          json({"cursor" => scan[:cursor], "count" => scan[:count], "queue" => scan[:queue],
                "next_cursor" => step.cursor, "keys" => step.entries.map(&:to_h)})
        end

        private

        def queue_json(q) = {"name" => q[:name], "size" => q[:size], "latency" => q[:latency], "paused" => q[:paused]}

        def page_json(paging) = {"page" => paging.page, "per" => paging.per, "total" => paging.total}

        def entry_json(e) = {"key" => Data.key(e), "score" => e.score, "job" => e.item}
      end
    end
  end
end
