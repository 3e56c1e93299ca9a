# frozen_string_literal: true

# App for spec/api/shards_spec.rb: two shards, "main" (REDIS_URL) and "jobs_b" (SHARD_B_URL), and
# workers that record each run (jid, pid, the server's shard setting) in main's Redis under
# "shards:ran", so the spec can tell which server ran what, and whether anything ran twice.
require "queue"
require "redis"

# Inside the spec process the spec configures both shards; inside a server the environment does.
if ENV["SHARD_B_URL"]
  JobQueue.configure do |c|
    c.redis = {url: ENV.fetch("REDIS_URL")}
    c.redis_shards = {"jobs_b" => {url: ENV.fetch("SHARD_B_URL")}}
    c.routing_rules = [["resource_boundary=cpu", "cpu_bound", "jobs_b"], ["*", nil]]
  end
end

module ShardRecord
  def self.redis
    Thread.current[:shard_record_redis] ||= Redis.new(url: ENV.fetch("REDIS_URL"))
  end

  def self.ran(worker, args)
    redis.rpush("shards:ran", JSON.generate("class" => worker.class.name, "jid" => worker.jid, "args" => args, "pid" => Process.pid,
      "runner" => "queue"))
  end
end

# On main.
class ShardMainJob
  include JobQueue::Worker
  sidekiq_options queue: "moving"

  def perform(*args)
    sleep 0.002 # a few ms of work, so a backlog forms in the migration spec
    ShardRecord.ran(self, args)
  end
end

# On jobs_b, by its store option.
class ShardBJob
  include JobQueue::Worker
  sidekiq_options queue: "on_b", store: "jobs_b"

  def perform(*args) = ShardRecord.ran(self, args)
end

# On jobs_b, by the routing rule's third element.
class ShardCpuWorker
  include JobQueue::ApplicationWorker
  worker_resource_boundary :cpu

  def perform(*args) = ShardRecord.ran(self, args)
end
