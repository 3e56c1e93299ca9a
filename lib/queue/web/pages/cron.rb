# frozen_string_literal: true

module JobQueue
  class Web
    module Pages
      # `/cron` and `/cron/NAME`: the cron schedules (JobQueue::Cron, sidekiq-cron's keys) with their
      # cron string, status, last and next run and recent jids; enable, disable or run one now.
      module Cron
        def self.routes(r)
          r.get("/cron", :cron)
          r.get("/cron/:name", :cron_job)
          r.post("/cron/:name/enable", :cron_enable)
          r.post("/cron/:name/disable", :cron_disable)
          r.post("/cron/:name/run", :cron_run)
        end

        def cron
          render(:cron, title: "Cron", jobs: Data.cron_jobs)
        end

        def cron_job
          job = Data.cron_job(params["name"])
          return not_found unless job

          render(:cron_job, title: "Cron #{job[:name]}", job: job)
        end

        def cron_enable = cron_change("Enabled") { |job| job.enable! }

        def cron_disable = cron_change("Disabled") { |job| job.disable! }

        def cron_run
          cron_change("Pushed") do |job|
            raise ArgumentError, "cron schedule #{job.name.inspect} was removed" unless job.run_now!
          end
        end

        private

        # Finds the schedule, changes it, and returns to the page the button was on.
        def cron_change(done)
          name = params["name"].to_s
          back = params["from"] == "job" ? "/cron/#{Rack::Utils.escape_path(name)}" : "/cron"
          job = JobQueue::Cron::Job.find(name)
          return redirect("/cron", "No cron schedule named #{name}.") unless job

          yield job
          redirect(back, "#{done} cron schedule #{name}.")
        rescue ArgumentError, JobQueue::Error => e
          redirect(back, e.message)
        end
      end
    end
  end
end
