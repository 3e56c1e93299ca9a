# frozen_string_literal: true

module JobQueue
  class Web
    module Pages
      # `/queues` and `/queues/NAME`: sizes, latency, paused; a queue's jobs a page at a time; delete
      # one job, clear, pause or unpause a queue.
      module Queues
        def self.routes(r)
          r.get("/queues", :queues)
          r.get("/queues/:name", :queue)
          r.post("/queues/:name/delete", :queue_delete_job)
          r.post("/queues/:name/clear", :queue_clear)
          r.post("/queues/:name/pause", :queue_pause)
          r.post("/queues/:name/unpause", :queue_unpause)
        end

        def queues
          render(:queues, title: "Queues", queues: Data.queues)
        end

        def queue
          name = params["name"]
          info = Data.queue(name)
          paging = Paging.new(params, total: info[:size])
          jobs = Data.queue_page(name, paging.offset, paging.per)
          render(:queue, title: "Queue #{name}", queue: info, jobs: jobs, paging: paging)
        end

        def queue_delete_job
          name = params["name"]
          value = params["job"].to_s
          jid = (JSON.parse(value)["jid"] rescue nil) # rubocop:disable Style/RescueModifier
          deleted = Data.delete_queued(name, value)
          redirect("/queues/#{escape_segment(name)}", deleted ? "Deleted job #{jid}." : "Job #{jid} was no longer in the queue.")
        end

        def queue_clear
          name = params["name"]
          Data.clear_queue(name)
          redirect("/queues", "Cleared queue #{name}.")
        end

        def queue_pause
          name = params["name"]
          Data.pause_queue(name)
          redirect(queue_return(name), "Paused queue #{name}: no process fetches from it; pushes go on.")
        end

        def queue_unpause
          name = params["name"]
          Data.unpause_queue(name)
          redirect(queue_return(name), "Unpaused queue #{name}.")
        end

        # The queue's own page when the button was there (`from=queue`), else the list.
        def queue_return(name) = params["from"] == "queue" ? "/queues/#{escape_segment(name)}" : "/queues"

        def escape_segment(text) = Rack::Utils.escape_path(text.to_s)
      end
    end
  end
end
