# frozen_string_literal: true

module JobQueue
  class Web
    module Pages
      # `/busy`: processes and the jobs they run; quiet and stop through the signals list each
      # process reads on its heartbeat.
      module Busy
        def self.routes(r)
          r.get("/busy", :busy)
          r.post("/busy/quiet", :busy_quiet)
          r.post("/busy/stop", :busy_stop)
        end

        def busy
          render(:busy, title: "Busy", processes: Data.processes, work: Data.work)
        end

        def busy_quiet = busy_signal(:quiet)

        def busy_stop = busy_signal(:stop)

        private

        def busy_signal(kind)
          identity = params["identity"].to_s
          sent = identity.empty? ? Data.signal_all(kind) : (Data.signal(identity, kind) ? 1 : 0)
          redirect("/busy", sent.positive? ? "Asked #{sent} process#{"es" if sent != 1} to #{kind}." : "No such process.")
        end
      end
    end
  end
end
