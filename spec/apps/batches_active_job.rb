# frozen_string_literal: true

# spec/apps/batches.rb with an ActiveJob job on our adapter, for the batch spec's ActiveJob example
# (loaded by the server and by a client subprocess: the spec process itself never loads ActiveJob).
require_relative "batches"
require "active_job"
require "active_job/queue_adapters/queue_adapter"

ActiveJob::Base.queue_adapter = :queue
ActiveJob::Base.logger = Logger.new(nil)

class BatchActiveJob < ActiveJob::Base
  queue_as :batch

  def perform(label)
    Record.redis.rpush("ran", label)
  end
end
