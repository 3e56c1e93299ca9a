# frozen_string_literal: true

require_relative "../queue"

# Opt-in top-level names, so code written for GitLab (`include ApplicationWorker`,
# `include CronjobQueue`) runs as written:
#
#   require "queue/gitlab"
#
#   class SomeScheduledTaskWorker
#     include ApplicationWorker
#     queue_namespace :cronjob
#   end
#
# A name the app already defines is left alone.
ApplicationWorker = JobQueue::ApplicationWorker unless defined?(ApplicationWorker)
CronjobQueue = JobQueue::CronjobQueue unless defined?(CronjobQueue)
