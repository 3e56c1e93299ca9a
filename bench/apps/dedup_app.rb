# frozen_string_literal: true

# The app bench/dedup.rb runs under our server: the same blank job with and without deduplication.
require_relative "queue_config"
require_relative "blank_counter"

class QueuePlainJob
  include JobQueue::Worker

  def perform(_n)
    BlankCounter.tick
  end
end

class QueueDedupJob
  include JobQueue::Worker
  idempotent!

  def perform(_n)
    BlankCounter.tick
  end
end
