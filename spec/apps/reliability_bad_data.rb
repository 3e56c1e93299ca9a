# frozen_string_literal: true

# Workers for the bad-data spec: EchoWorker (from basic.rb) is the healthy job that must still run
# after the broken ones; ReliabilityPairWorker takes exactly two arguments, so a job with one fails
# in perform.
require_relative "basic"

class ReliabilityPairWorker
  include JobQueue::Worker

  def perform(left, right)
    Record.redis.rpush("ran:pair", JSON.generate([left, right]))
  end
end
