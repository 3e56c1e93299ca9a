# frozen_string_literal: true

# The scheduling spec's worker: the first thing it does is write down when it started, under its jid,
# so the spec can set that against the time the job was scheduled for.
require_relative "basic"

class ReliabilityClockWorker
  include JobQueue::Worker

  def perform(_label)
    Record.redis.hset("started_at", jid, Time.now.to_f.to_s)
  end
end
