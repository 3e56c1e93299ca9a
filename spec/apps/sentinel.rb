# frozen_string_literal: true

# The Redis Sentinel specs' server app: config.redis finds the master through the sentinels that
# SENTINELS names ("host:port,host:port,..."), and each job records its run through JobQueue.redis,
# which finds the master through them too (redis-rb's own sentinel support).
require "queue"

# Inside the spec process the spec configures Redis; inside a server the environment does.
if ENV["SENTINELS"]
  JobQueue.configure do |c|
    c.redis = {url: "redis://mymaster/0", sentinels: ENV["SENTINELS"].split(","), role: :master}
  end
end

class SentinelWorker
  include JobQueue::Worker

  def perform(id)
    JobQueue.redis { |conn| conn.rpush("ran", id.to_s) }
  end
end
