# frozen_string_literal: true

# compat_queue.rb with schedules declared on workers (`cron`): a plain worker, and a GitLab-style
# CronjobQueue worker whose jobs go to its `cronjob:*` queue. CRON_SCHEDULE_FILE, when set, names a
# schedule file loaded with them.
require_relative "compat_queue"

JobQueue::Cron.schedule_file = ENV.fetch("CRON_SCHEDULE_FILE", "/nonexistent/schedule.yml")

# Runs every second from its own declaration.
class CronDeclaredWorker
  include JobQueue::Worker
  cron "* * * * * *", args: ["declared"]

  def perform(*args)
    CompatRecord.ran("queue #{JobQueue::VERSION}", self, args)
  end
end

# GitLab's shape: a cron worker in the cronjob namespace, with a feature category.
class PruneCronWorker
  include JobQueue::ApplicationWorker
  include JobQueue::CronjobQueue
  feature_category :database
  cron "* * * * * *"

  def perform(*args)
    CompatRecord.ran("queue #{JobQueue::VERSION}", self, args)
  end
end
