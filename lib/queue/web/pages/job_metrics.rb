# frozen_string_literal: true

module JobQueue
  class Web
    module Pages
      # `/job-metrics`: per job class, how many ran and failed and how long they took, over the last
      # hour(s) (`?range=` minutes: 60, 180 or 480), and one class's run times as Sidekiq's histogram
      # (`?class=`, the busiest class by default). Read by the engine from the keys it writes for
      # Sidekiq 7/8's own Metrics page (`config.sidekiq_metrics`); two Redis round trips a request,
      # O(minutes × classes). (`/metrics` is the Prometheus endpoint.)
      module JobMetrics
        RANGES = [60, 180, 480].freeze
        # Upper bounds of Sidekiq's histogram buckets, in ms (the 26th is "slower").
        BUCKET_MS = [20, 30, 45, 65, 100, 150, 225, 335, 500, 750, 1100, 1700, 2500, 3800, 5750, 8500, 13_000,
          20_000, 30_000, 45_000, 65_000, 100_000, 150_000, 225_000, 335_000].freeze

        def self.routes(r)
          r.get("/job-metrics", :job_metrics)
        end

        def job_metrics
          version = JobQueue.config.sidekiq_metrics
          return render(:job_metrics, title: "Metrics", version: nil) unless version

          range = RANGES.include?(params["range"].to_i) ? params["range"].to_i : RANGES.first
          report = Data.job_metrics(version, range, params["class"].to_s.empty? ? nil : params["class"].to_s)
          render(:job_metrics, title: "Metrics", version: version, range: range, **report)
        end

        # "< 20 ms", …, "< 5.75 s", …, "≥ 335 s": the label of histogram bucket `i`.
        def bucket_label(i)
          ms = BUCKET_MS[i] || BUCKET_MS.last
          text = ms < 1000 ? "#{ms} ms" : "#{(ms / 1000.0).to_s.sub(/\.0\z/, "")} s"
          i < BUCKET_MS.size ? "< #{text}" : "≥ #{text}"
        end

        # Milliseconds as "12 ms", "1.5 s", "3 min".
        def ms_text(ms)
          ms = ms.to_f
          return "#{ms < 10 ? ms.round(1).to_s.delete_suffix(".0") : ms.round} ms" if ms < 1000

          duration(ms / 1000.0)
        end
      end
    end
  end
end
