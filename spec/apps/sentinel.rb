# frozen_string_literal: true

# The Redis Sentinel specs' server app: config.redis finds the master through the sentinels that
# SENTINELS names ("host:port,host:port,..."), and each job records its run through the engine and
# through JobQueue.redis, which finds the master through them too (redis-rb's own sentinel support).
require "queue"

# Inside the spec process the spec configures Redis; inside a server the environment does.
if ENV["SENTINELS"]
  JobQueue.configure do |c|
    c.redis = {url: "redis://mymaster/0", sentinels: ENV["SENTINELS"].split(","), role: :master}
  end
end

# Records a run where the server's engine connections are now: a push to the "record" queue, which
# no server here takes from.
class SentinelRecord
  include JobQueue::Worker
  sidekiq_options queue: "record"
end

class SentinelWorker
  include JobQueue::Worker

  def perform(id)
    SentinelRecord.perform_async(id)
    JobQueue.redis { |conn| conn.rpush("ran", id.to_s) }
  end
end
