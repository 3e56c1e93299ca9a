# frozen_string_literal: true

# App for spec/web's busy page: a job that runs until the spec releases it.
require_relative "basic"

# Blocks until the spec pushes to "web:release:<jid>" (at most the seconds given).
class WebBlockerWorker
  include JobQueue::Worker

  def perform(seconds)
    Record.redis.rpush("web:started", jid)
    Record.redis.blpop("web:release:#{jid}", timeout: seconds)
  end
end
