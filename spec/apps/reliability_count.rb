# frozen_string_literal: true

# The crash test's worker: as cheap as a job can be while still leaving proof that it ran, and where.
# Each run adds one to the job's counter in the hash of the process that ran it, `runs:<pid>`, so the
# spec tells a job that never ran (no field anywhere) from one that ran twice, and which processes
# ran it.
require_relative "basic"

class ReliabilityCountWorker
  include JobQueue::Worker

  def perform(id)
    Record.redis.hincrby("runs:#{Process.pid}", id.to_s, 1)
  end
end
