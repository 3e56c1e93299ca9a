# frozen_string_literal: true

# App for spec/reliability/batch_crash_spec.rb: a batch job as cheap as a job can be while leaving
# proof of each run (`runs`, job id => runs), and a success callback that records, when it starts,
# how many distinct jobs had run and when.
require_relative "basic"

class BatchCountWorker
  include JobQueue::Worker

  def perform(id)
    Record.redis.hincrby("runs", id.to_s, 1)
  end
end

class BatchCrashCallback
  def on_success(status, _options)
    Record.redis.rpush("success", JSON.generate("ran" => Record.redis.hlen("runs"), "pending" => status.pending,
      "total" => status.total, "failures" => status.failures))
  end

  def on_complete(status, _options)
    Record.redis.rpush("complete", status.pending.to_s)
  end
end
