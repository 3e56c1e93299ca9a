# frozen_string_literal: true

# A worker for the TLS spec: it records its run as a file, since the spec's Redis speaks only TLS.
require "queue"

JobQueue.configure { |c| c.redis = {url: ENV["REDIS_URL"]} } if ENV["REDIS_URL"]

class TlsWorker
  include JobQueue::Worker

  def perform(text)
    File.write(File.join(ENV.fetch("TLS_SPEC_DIR"), "ran"), text)
  end
end
