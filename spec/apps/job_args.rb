# frozen_string_literal: true

# App for spec/api/job_args_spec.rb: a worker that records the arguments `perform` was given.
require_relative "basic"

class ArgsJob
  include JobQueue::Worker

  def perform(*args)
    Record.redis.rpush("args", JSON.generate([jid, args]))
  end
end
