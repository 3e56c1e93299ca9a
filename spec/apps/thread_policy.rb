# frozen_string_literal: true

# A server whose job records the name of the thread it ran on, for spec/api/thread_policy_spec.rb.
# POLICY=off sets `job_thread_policy = nil`.
require_relative "basic"

JobQueue.configure { |c| c.job_thread_policy = nil } if ENV["POLICY"] == "off"

class ThreadNameWorker
  include JobQueue::Worker

  def perform
    Record.redis.rpush("ran:threads", Thread.current.name)
  end
end
