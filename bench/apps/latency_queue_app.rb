# frozen_string_literal: true

# The app the latency benchmark runs under our server:
#   ruby exe/queue -c 5 -q critical -q default -r bench/apps/latency_queue_app.rb   (REDIS_URL set)
# Logging at WARN, as for Sidekiq.
require_relative "queue_config"
require_relative "latency_jobs"

class LatencyFillerJob
  include JobQueue::Worker
  include LatencyJobs::Filler
end

class LatencyProbeJob
  include JobQueue::Worker
  include LatencyJobs::Probe
end
