# frozen_string_literal: true

# Capsules for spec/api/capsules_spec.rb: a "single" capsule of one thread on queue `single`, and the
# default capsule (-c on the command line) on `default`. With CAPSULES_VIA=shim the app is written for
# Sidekiq 7 on the compat shim (`Sidekiq.configure_server { |config| config.capsule(...) }`), with
# CAPSULES_VIA=default_configuration through `Sidekiq.default_configuration`.
#
# Each job counts itself running in `caps:running:<queue>` while it runs and waits (at most `wait`
# seconds) for a second job of its queue to be running too: in a capsule of one thread that never
# happens, in the default capsule it does at once. `caps:max:<queue>` keeps the most seen at once.
require "json"

case ENV["CAPSULES_VIA"]
when "shim", "default_configuration"
  require "queue/compat/sidekiq"
  require "sidekiq"
  if ENV["CAPSULES_VIA"] == "shim"
    Sidekiq.configure_server do |config|
      config.capsule("single") do |cap|
        cap.concurrency = 1
        cap.queues = %w[single]
      end
    end
  else
    Sidekiq.default_configuration.capsule("single") { |cap| cap.concurrency = 1 }.queues = %w[single]
  end
  CapsuleBase = Sidekiq::Job
else
  require "queue"
  JobQueue.configure do |config|
    config.capsule("single") do |cap|
      cap.concurrency = 1
      cap.queues = %w[single]
    end
  end
  CapsuleBase = JobQueue::Worker
end
require "redis"
JobQueue.configure { |c| c.redis = {url: ENV["REDIS_URL"]} } if ENV["REDIS_URL"]

module CapsuleRecord
  def self.redis
    Thread.current[:capsule_record] ||= Redis.new(path: ENV.fetch("REDIS_URL").delete_prefix("unix://"))
  end
end

class CapsuleJob
  include CapsuleBase

  def perform(queue, wait)
    r = CapsuleRecord.redis
    now = r.incr("caps:running:#{queue}")
    r.eval("if tonumber(redis.call('GET', KEYS[1]) or 0) < tonumber(ARGV[1]) then redis.call('SET', KEYS[1], ARGV[1]) end", keys: ["caps:max:#{queue}"], argv: [now])
    deadline = Time.now + wait
    sleep 0.01 until r.get("caps:running:#{queue}").to_i >= 2 || Time.now > deadline
    r.rpush("caps:ran", JSON.generate("queue" => queue, "thread" => Thread.current.name))
  ensure
    r&.decr("caps:running:#{queue}")
  end
end
