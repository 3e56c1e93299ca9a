# frozen_string_literal: true

# The app side of a mail_room setup (as GitLab has it): mail_room's Sidekiq delivery pushes each
# incoming message as a job for the worker named in its config (`delivery_options: {worker:
# "EmailReceiverWorker", queue: "email_receiver"}`); our server (`queue -r` this file) runs it. The
# worker records what it got in Redis for spec/ecosystem/mail_room_spec.rb. With MAIL_ROOM_APP_SHIM=1
# the worker is a Sidekiq::Worker of an app on the compat shim (as GitLab's was), else a JobQueue::Worker.
require "queue/compat/sidekiq" if ENV["MAIL_ROOM_APP_SHIM"] == "1"
require "queue"
require "json"
require "redis"

JobQueue.configure { |c| c.redis = {url: ENV["REDIS_URL"]} }

class EmailReceiverWorker
  include(ENV["MAIL_ROOM_APP_SHIM"] == "1" ? Sidekiq::Worker : JobQueue::Worker)

  def perform(raw)
    redis = Redis.new(path: ENV.fetch("REDIS_URL").delete_prefix("unix://"))
    redis.rpush("mail_room:received", JSON.generate(
      "jid" => jid, "raw" => raw, "encoding" => raw.encoding.name, "valid" => raw.valid_encoding?,
      "worker" => defined?(Sidekiq::Worker) && is_a?(Sidekiq::Worker) ? "Sidekiq::Worker" : "JobQueue::Worker"
    ))
  ensure
    redis&.close
  end
end
