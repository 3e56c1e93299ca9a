# frozen_string_literal: true

# App for spec/api/expiry_spec.rb: a worker whose jobs expire a minute after they were to run, and
# one without expiry, both recording the jobs they ran.
require_relative "basic"

class ExpiringWorker
  include JobQueue::Worker
  sidekiq_options queue: "expiring", expires_in: 60

  def perform(label)
    Record.redis.rpush("ran:expiring", label)
  end
end
