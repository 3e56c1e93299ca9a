# frozen_string_literal: true

# A job the spec holds in flight: it says it started (with the pid of the process running it), then
# waits until the spec sets the `release` key, then says it finished. Spec-side waits watch these
# lists; nothing depends on how long a job takes. Jobs labelled "warm-up" (with how many there are)
# let the server time the queue as quick, so it fetches it in batches: they only count themselves in
# memory, and the last one says so (in `warmed`), so their measured time is not a Redis round trip,
# which a loaded machine can stretch past the batch budget.
require_relative "basic"

class ReliabilityBlockingWorker
  include JobQueue::Worker

  WARMED = Mutex.new
  @warmed = 0

  class << self
    def warmed!
      WARMED.synchronize { @warmed += 1 }
    end
  end

  def perform(label, warm_ups = nil)
    redis = Record.redis
    if label == "warm-up"
      redis.rpush("warmed", warm_ups) if self.class.warmed! == warm_ups
      return
    end

    redis.rpush("started", JSON.generate("jid" => jid, "pid" => Process.pid, "label" => label))
    sleep 0.01 until redis.exists?("release")
    redis.rpush("finished", JSON.generate("jid" => jid, "pid" => Process.pid, "label" => label))
  end
end
