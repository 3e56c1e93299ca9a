# frozen_string_literal: true

# The app the latency benchmark runs under the real Sidekiq 6.4.1:
#   ruby -S sidekiq -c 5 -q critical -q default -r bench/apps/latency_sidekiq_app.rb   (REDIS_URL set)
# Sidekiq's scheduler is left at its defaults (see bench/README.md). Logging at WARN, deprecation
# warnings of redis 4.8 silenced, as in sidekiq_app.rb.
require "logger"
require "sidekiq"
require_relative "latency_jobs"

Redis.silence_deprecations = true if Redis.respond_to?(:silence_deprecations=)
Sidekiq.logger.level = Logger::WARN

class LatencyFillerJob
  include Sidekiq::Worker
  include LatencyJobs::Filler
end

class LatencyProbeJob
  include Sidekiq::Worker
  include LatencyJobs::Probe
end
