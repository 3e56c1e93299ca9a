# frozen_string_literal: true

# The app the throughput benchmark runs under our server:
#   ruby exe/queue -c 10 -r bench/apps/queue_app.rb   (REDIS_URL, BENCH_N, BENCH_DONE set)
# Logging at WARN, as for Sidekiq (BENCH_LOG_LEVEL=info turns the per-job lines on).
require "logger"
require "queue"
require_relative "blank_counter"

JobQueue.configure do |c|
  c.redis = {url: ENV.fetch("REDIS_URL")}
  c.logger.level = ENV.fetch("BENCH_LOG_LEVEL", "warn")
end

class QueueBlankJob
  include JobQueue::Worker

  def perform
    BlankCounter.tick
  end
end
