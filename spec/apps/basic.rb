# frozen_string_literal: true

# Workers for server-process specs. Each records what it ran in Redis (through the test's own redis
# gem client), so the spec can check it.
require "queue"
require "redis"

# Inside the spec process the suite configures Redis; inside a server the environment does.
JobQueue.configure { |c| c.redis = {url: ENV["REDIS_URL"]} } if ENV["REDIS_URL"]

module Record
  def self.redis
    Thread.current[:record_redis] ||= Redis.new(url: ENV.fetch("REDIS_URL"))
  end
end

class EchoWorker
  include JobQueue::Worker

  def perform(*args)
    Record.redis.rpush("ran:echo", JSON.generate("jid" => jid, "args" => args))
  end
end
