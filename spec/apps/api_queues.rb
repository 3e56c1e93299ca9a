# frozen_string_literal: true

# App for spec/api/queue_weights_spec.rb: a job as quick as a job can be while recording, in the order
# jobs ran, the queue it was pushed to (its one argument).
require_relative "basic"

# Batches of at most 5: the spec's shares then rest on some 200 draws of the queue order per 1,000
# jobs, not a handful.
JobQueue.configure { |c| c.max_batch = 5 }

class QueueOrderWorker
  include JobQueue::Worker

  def perform(queue)
    Record.redis.rpush("ran:queues", queue)
  end
end
