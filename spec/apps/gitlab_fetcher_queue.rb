# frozen_string_literal: true

# Our side of a move from Sidekiq with gitlab-sidekiq-fetcher (spec/apps/gitlab_fetcher_sidekiq.rb):
# the same worker name, as a JobQueue::Worker that records each run in Redis.
require "queue"
require "json"
require "redis"

JobQueue.configure { |c| c.redis = {url: ENV["REDIS_URL"]} }

class GlfetchJob
  include JobQueue::Worker

  def perform(label)
    redis = Redis.new(path: ENV.fetch("REDIS_URL").delete_prefix("unix://"))
    redis.rpush("glfetch:ran", JSON.generate("label" => label, "jid" => jid, "pid" => Process.pid,
      "at" => Process.clock_gettime(Process::CLOCK_REALTIME)))
  ensure
    redis&.close
  end
end
