# frozen_string_literal: true

# An iterable job as written for Sidekiq 7.3, in an app that dropped the sidekiq gem for the compat
# shim; run by our server (spec/compat/iterable_shim_spec.rb). It records every item it ran
# (`shim_it:runs`), how many (`shim_it:count`), the cursors it started from and its callbacks.
require "queue/compat/sidekiq"
require "sidekiq"
require "sidekiq/iterable_job"
require "redis"

module ShimIterableRecord
  def self.redis
    Thread.current[:shim_iterable_record] ||= Redis.new(path: ENV.fetch("REDIS_URL").delete_prefix("unix://"))
  end
end

class ShimIterableJob
  include Sidekiq::IterableJob
  sidekiq_options queue: "shim_it"

  def build_enumerator(count, cursor:)
    ShimIterableRecord.redis.rpush("shim_it:built", JSON.generate(cursor))
    array_enumerator((0...count).to_a, cursor: cursor)
  end

  def each_iteration(item, _count)
    sleep 0.05
    ShimIterableRecord.redis.hincrby("shim_it:runs", item.to_s, 1)
    ShimIterableRecord.redis.incr("shim_it:count")
  end

  def on_start = event("on_start")

  def on_resume = event("on_resume")

  def on_stop = event("on_stop#{" interrupted" if interrupted?}")

  def on_complete = event("on_complete")

  private

  def event(name)
    ShimIterableRecord.redis.rpush("shim_it:events", name)
  end
end

raise "Sidekiq::Job::Interrupted is not the shim's" unless Sidekiq::Job::Interrupted.equal?(JobQueue::Iterable::Interrupted)
