# frozen_string_literal: true

# compat_queue.rb with its cron schedule file named by CRON_SCHEDULE_FILE (the server loads it at start).
require_relative "compat_queue"

JobQueue::Cron.schedule_file = ENV.fetch("CRON_SCHEDULE_FILE")
