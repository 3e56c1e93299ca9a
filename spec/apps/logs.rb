# frozen_string_literal: true

# App for the log specs (spec/api/server_log_lines_spec.rb, spec/api/ordered_morgue_command_spec.rb):
# plain and ordered workers that log through the logger, fail on demand, and a Marshal ordered worker
# whose payloads may be any Ruby object.
require_relative "basic"

JobQueue.configure_server do |config|
  config.ordered_poll_interval = 0.05
  config.job_logs = :json if ENV["QUEUE_JOB_LOGS"] == "json"
end

# Held from before the server starts, as an app may keep `Sidekiq.logger` (a constant, an initializer
# handing it to a library): its lines must join the job lines' stream in order all the same.
EARLY_LOGGER = JobQueue.logger

# A Marshal payload JSON cannot hold.
LogsPoint = Struct.new(:x, :y)

class LoggingWorker
  include JobQueue::Worker
  sidekiq_options retry: false

  # Logs `text` through the logger held from load time, then through the worker's logger; raises
  # when `fail`.
  def perform(text, fail = false)
    EARLY_LOGGER.info("#{text} (early)")
    logger.info("#{text} (logger)")
    raise ArgumentError, "#{text} failed" if fail
  ensure
    Record.redis.rpush("ran:logs", text)
  end
end

module LogsOrderedWorker
  extend JobQueue::OrderedWorker
  self.shards_count = 1
  self.max_retry_count = 0
  self.batch_size = 2

  def self.perform(payloads_by_id)
    JobQueue.logger.info("ordered #{payloads_by_id.keys.join(",")}")
    raise ArgumentError, "doomed batch" if payloads_by_id.each_value.any? { |payloads| payloads.include?("doomed") }
  ensure
    Record.redis.rpush("ran:logs", payloads_by_id.keys.join(","))
  end
end

module LogsMarshalWorker
  extend JobQueue::OrderedWorker
  payload_format :marshal
  self.shards_count = 1

  def self.perform(_payloads_by_id) = nil
end
