# frozen_string_literal: true

# A job the spec holds in flight: it says it started (with the pid of the process running it), then
# waits until the spec sets the `release` key, then says it finished. Spec-side waits watch these
# lists; nothing depends on how long a job takes. A job labelled "warm-up" only says it ran (in
# `warmed`): a few of those let the server time the queue as quick, so it fetches it in batches.
require_relative "basic"

class ReliabilityBlockingWorker
  include JobQueue::Worker

  def perform(label)
    redis = Record.redis
    return redis.rpush("warmed", label) if label == "warm-up"

    redis.rpush("started", JSON.generate("jid" => jid, "pid" => Process.pid, "label" => label))
    sleep 0.01 until redis.exists?("release")
    redis.rpush("finished", JSON.generate("jid" => jid, "pid" => Process.pid, "label" => label))
  end
end
