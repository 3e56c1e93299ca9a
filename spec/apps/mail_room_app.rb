# frozen_string_literal: true

# The app side of a mail_room setup (as GitLab has it): mail_room's Sidekiq delivery pushes each
# incoming message as a job for the worker named in its config (`delivery_options: {worker:
# "EmailReceiverWorker", queue: "email_receiver"}`); our server (`queue -r` this file) runs it. The
# worker records what it got in Redis for spec/ecosystem/mail_room_spec.rb.
require "queue"
require "json"
require "redis"

JobQueue.configure { |c| c.redis = {url: ENV["REDIS_URL"]} }

class EmailReceiverWorker
  include JobQueue::Worker

  def perform(raw)
    redis = Redis.new(path: ENV.fetch("REDIS_URL").delete_prefix("unix://"))
    redis.rpush("mail_room:received", JSON.generate(
      "jid" => jid, "raw" => raw, "encoding" => raw.encoding.name, "valid" => raw.valid_encoding?
    ))
  ensure
    redis&.close
  end
end
