# frozen_string_literal: true

# The priority test's workers. Fillers keep every processor thread busy on `default` (20 ms each,
# counted in `filler:ran`); a critical job records the moment it started next to the time the spec
# pushed it (both read from this machine's clock), so the spec can tell how long it waited.
require_relative "basic"

class PriorityFillerWorker
  include JobQueue::Worker

  def perform
    Record.redis.incr("filler:ran")
    sleep 0.02
  end
end

class PriorityCriticalWorker
  include JobQueue::Worker
  sidekiq_options queue: "critical"

  def perform(pushed_at)
    started_at = Time.now.to_f
    Record.redis.rpush("critical:started",
      JSON.generate("pushed_at" => pushed_at, "started_at" => started_at, "pid" => Process.pid))
  end
end
