# frozen_string_literal: true

# The app bench/dedup.rb runs under our server: the same blank job with and without deduplication.
require "logger"
require "queue"
require_relative "blank_counter"

JobQueue.configure do |c|
  c.redis = {url: ENV.fetch("REDIS_URL")}
  c.logger.level = Logger::WARN
end

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
