# frozen_string_literal: true

# The crash test's worker: as cheap as a job can be while still leaving proof that it ran. Each run
# adds one to the job's own counter in the `runs` hash, so the spec can tell a job that never ran (no
# field) from one that ran twice (a count of 2).
require_relative "basic"

class ReliabilityCountWorker
  include JobQueue::Worker

  def perform(id)
    Record.redis.hincrby("runs", id.to_s, 1)
  end
end
