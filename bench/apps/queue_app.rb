# frozen_string_literal: true

# The app the throughput benchmark runs under our server:
#   ruby exe/queue -c 10 -r bench/apps/queue_app.rb   (REDIS_URL, BENCH_N, BENCH_DONE set)
# Logging at WARN, as for Sidekiq (BENCH_LOG_LEVEL=info turns the per-job lines on).
require_relative "queue_config"
require_relative "blank_counter"

class QueueBlankJob
  include JobQueue::Worker

  def perform
    BlankCounter.tick
  end
end
