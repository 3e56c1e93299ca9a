# frozen_string_literal: true

# App for spec/api/pause_spec.rb: plain workers on two queues and an ordered worker, each recording
# which process ran it and when it started.
require_relative "basic"

JobQueue.configure_server do |config|
  config.ordered_poll_interval = 0.05
end

module PauseApp
  def self.record(list, fields)
    Record.redis.rpush(list, JSON.generate(fields.merge("pid" => Process.pid, "at" => Time.now.to_f)))
  end
end

# Some work per job (2 ms), so that a server pausing mid-stream holds prefetched jobs.
class HeldWorker
  include JobQueue::Worker
  sidekiq_options queue: "held"

  def perform(n)
    PauseApp.record("pause:held", "n" => n)
    sleep 0.002
  end
end

class FreeWorker
  include JobQueue::Worker
  sidekiq_options queue: "free"

  def perform(pushed_at)
    PauseApp.record("pause:free", "pushed_at" => pushed_at)
  end
end

module PausedOrderedWorker
  extend JobQueue::OrderedWorker
  self.shards_count = 2

  def self.perform(payloads_by_id)
    payloads_by_id.each_key { |id| PauseApp.record("pause:ordered", "id" => id) }
  end
end
