# frozen_string_literal: true

# App for spec/api/ordered_server_spec.rb: an ordered worker and a plain worker in one server. The
# ordered worker records every run (id, payloads, thread) and catches overlapping runs of one id with
# a Redis set it adds the id to while it runs.
require_relative "basic"

module OrderedSpecApp
  def self.record(list, entry)
    Record.redis.rpush(list, JSON.generate(entry))
  end
end

JobQueue.configure_server do |config|
  config.ordered_poll_interval = 0.05
  config.ordered_server_middlewares << lambda do |worker, batch, &block|
    OrderedSpecApp.record("ordered:middleware", "worker" => worker.name, "ids" => batch.keys)
    block.call
  end
end

module OrderedSyncWorker
  extend JobQueue::OrderedWorker
  self.shards_count = 3
  self.batch_size = 2

  def self.perform(payloads_by_id)
    payloads_by_id.each_key do |id|
      OrderedSpecApp.record("ordered:overlap", "id" => id) unless Record.redis.sadd?("ordered:running", id)
    end
    payloads_by_id.each do |id, payloads|
      OrderedSpecApp.record("ordered:runs", "id" => id, "payloads" => payloads, "thread" => Thread.current.name, "pid" => Process.pid)
    end
    sleep 0.002 # some work, so that a second runner of the same id would overlap
  ensure
    payloads_by_id.each_key { |id| Record.redis.srem("ordered:running", id) }
  end
end

# Fails the first run of ids f*, and every run with a "doomed" payload; records runs and what reached
# the morgue.
module OrderedFlakyWorker
  extend JobQueue::OrderedWorker
  self.shards_count = 2
  self.max_retry_count = 1

  def self.retry_in(_count) = 0

  def self.perform(payloads_by_id)
    payloads_by_id.each do |id, payloads|
      run = Record.redis.incr("ordered:flaky:#{id}")
      OrderedSpecApp.record("ordered:flaky", "id" => id, "payloads" => payloads, "run" => run)
      raise "doomed #{id}" if payloads.include?("doomed")
      raise "first run of #{id} fails" if run == 1 && id.start_with?("f")
    end
  end

  def self.retries_exhausted(batch)
    OrderedSpecApp.record("ordered:exhausted", batch)
  end
end
