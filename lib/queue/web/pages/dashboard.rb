# frozen_string_literal: true

module JobQueue
  class Web
    module Pages
      # `/`: processed and failed totals, the history graph (per day, or live samples while
      # `?live=SECONDS` refreshes the page), and each queue's size and latency.
      module Dashboard
        HISTORY_DAYS = [7, 30, 90].freeze
        LIVE_KEY = "queue.live"
        LIVE_SAMPLES = 40

        def self.routes(r)
          r.get("/", :dashboard)
        end

        def dashboard
          stats = Data.stats
          days = HISTORY_DAYS.include?(params["days"].to_i) ? params["days"].to_i : 30
          live = params["live"].to_i.clamp(0, 60)
          graph = live.positive? ? live_graph(stats) : Graph.new(Data.history(days)).to_html
          render(:dashboard, title: "Dashboard", stats: stats, days: days, live: live, graph: graph,
            queues: Data.queues, ordered: Data.ordered_stats)
        end

        private

        # Live mode keeps the last samples of the totals in the session and draws their differences:
        # jobs per refresh interval, with no script.
        def live_graph(stats)
          samples = Array(session[LIVE_KEY]).last(LIVE_SAMPLES)
          samples << [Time.now.strftime("%T"), stats["processed"], stats["failed"]]
          session[LIVE_KEY] = samples
          pairs = samples.each_cons(2).map { |(_, p0, f0), (at, p1, f1)| [at, [p1 - p0, 0].max, [f1 - f0, 0].max] }
          pairs = [[samples.last.first, 0, 0]] if pairs.empty?
          Graph.new({"processed" => pairs.map { |at, p, _| [at, p] }, "failed" => pairs.map { |at, _, f| [at, f] }},
            unit: "refresh").to_html
        end
      end
    end
  end
end
