# frozen_string_literal: true

# The app the ordered benchmark runs under our server:
#   ruby exe/queue -c 5 -r bench/apps/ordered_app.rb   (REDIS_URL, BENCH_N, BENCH_DONE, BENCH_BATCH set)
# One blank ordered worker, 5 shards, batch size BENCH_BATCH; logging at WARN.
require_relative "queue_config"
require_relative "blank_counter"

module OrderedBlankJob
  extend JobQueue::OrderedWorker
  self.shards_count = 5
  self.batch_size = Integer(ENV.fetch("BENCH_BATCH"))

  # One tick per id: the benchmark counts ordered jobs (ids), whatever the batch size.
  def self.perform(payloads_by_id)
    payloads_by_id.each_key { BlankCounter.tick }
  end
end
