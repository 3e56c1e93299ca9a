# frozen_string_literal: true

module JobQueue
  class Web
    module Pages
      # `/scheduled`, `/retries`, `/dead`: a page of entries (searchable by class or jid), one entry's
      # detail, and the actions on one entry, on the checked ones, or on all.
      #
      # An entry is named by its key, "SCORE-JID" (as in Sidekiq's dashboard URLs), so an action
      # finds it without a scan.
      module Sets
        # actions: what one entry (or the checked ones) can do; all: what the whole set can do.
        KINDS = {
          "scheduled" => {title: "Scheduled", actions: %w[retry delete kill], all: %w[delete], retry_label: "Enqueue now"},
          "retries" => {title: "Retries", actions: %w[retry delete kill], all: %w[retry delete kill], retry_label: "Retry now"},
          "dead" => {title: "Dead", actions: %w[retry delete], all: %w[retry delete], retry_label: "Retry now"}
        }.freeze

        def self.routes(r)
          KINDS.each_key do |kind|
            fixed = {"kind" => kind}
            r.get("/#{kind}", :set_index, fixed)
            r.get("/#{kind}/:key", :set_entry, fixed)
            r.post("/#{kind}/bulk", :set_bulk, fixed)
            r.post("/#{kind}/all/:action", :set_all, fixed)
            r.post("/#{kind}/:key/:action", :set_entry_action, fixed)
          end
        end

        def set_index
          kind = set_kind or return not_found
          filter = params["q"].to_s.strip
          if filter.empty?
            paging = Paging.new(params, total: Data.set_size(kind))
            result = Data.set_page(kind, paging.offset, paging.per)
          else
            # A search reads a bounded window per request; "more" continues from where it stopped.
            paging = Paging.new(params)
            from = [params["from"].to_i, 0].max
            result = Data.set_page(kind, from, paging.per, filter)
          end
          render(:set, title: KINDS[kind][:title], kind: kind, entries: result.entries, paging: paging, filter: filter,
            next_offset: result.next_offset, total: result.total)
        end

        def set_entry
          kind = set_kind or return not_found
          entry = Data.set_entry(kind, params["key"]) or
            return redirect("/#{kind}", "That job is no longer in #{KINDS[kind][:title].downcase}.")
          render(:entry, title: entry.display_class, kind: kind, entry: entry)
        end

        def set_entry_action
          kind = set_kind or return not_found
          action = set_action(kind) or return not_found
          done = Data.set_act(kind, [params["key"]], action)
          redirect("/#{kind}", done.positive? ? "#{past(action)} 1 job." : "That job is no longer in #{KINDS[kind][:title].downcase}.")
        end

        def set_bulk
          kind = set_kind or return not_found
          action = set_action(kind, params["do"]) or return redirect("/#{kind}", "Choose an action.")
          keys = Array(params["keys"]).map(&:to_s).reject(&:empty?)
          return redirect("/#{kind}", "No job was checked.") if keys.empty?

          done = Data.set_act(kind, keys, action)
          redirect(back_to(kind), "#{past(action)} #{done} of #{keys.size} job#{"s" if keys.size != 1}.")
        end

        def set_all
          kind = set_kind or return not_found
          action = KINDS[kind][:all].include?(params["action"]) ? params["action"] : (return not_found)
          done = Data.set_all(kind, action)
          redirect("/#{kind}", "#{past(action)} #{done} job#{"s" if done != 1}.")
        end

        private

        def set_kind
          KINDS.key?(params["kind"]) ? params["kind"] : nil
        end

        def set_action(kind, name = params["action"])
          KINDS[kind][:actions].include?(name) ? name : nil
        end

        def past(action) = {"retry" => "Queued", "delete" => "Deleted", "kill" => "Killed"}.fetch(action)

        # Back to the page the bulk form was on.
        def back_to(kind)
          query = params.slice("page", "per", "q").reject { |_, v| v.to_s.empty? }
          query.empty? ? "/#{kind}" : "/#{kind}?#{Rack::Utils.build_query(query)}"
        end
      end
    end
  end
end
