# frozen_string_literal: true

# App for `queue web -r` in spec/web: Redis from the environment, and one ordered worker, so the
# dashboard process knows it.
require "queue"

JobQueue.configure { |c| c.redis = {url: ENV["REDIS_URL"]} } if ENV["REDIS_URL"]

module WebCliOrderedWorker
  extend JobQueue::OrderedWorker
  self.shards_count = 2

  def self.perform(_batch); end
end
