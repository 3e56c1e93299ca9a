# frozen_string_literal: true

# A Sidekiq 6.4 app, as written for Sidekiq, that dropped the sidekiq gem: the only new line is the
# shim's require. Run by our server (`queue -r` this file) and used by a plain `ruby` client process
# (spec/compat/sidekiq_shim_spec.rb). Records go to Redis through the redis gem.
require "queue/compat/sidekiq"
require "sidekiq"
require "redis"

module ShimRecord
  def self.redis
    Thread.current[:shim_record] ||= Redis.new(path: ENV.fetch("REDIS_URL").delete_prefix("unix://"))
  end

  def self.add(list, entry)
    redis.rpush(list, JSON.generate(entry))
  end
end

class StampClientMiddleware
  def call(_worker_class, job, queue, _redis_pool)
    job["stamped_by"] = "client middleware in #{queue}"
    yield
  end
end

class RecordServerMiddleware
  def initialize(label)
    @label = label
  end

  def call(worker, job, queue)
    ShimRecord.add("shim:middleware", "label" => @label, "class" => worker.class.name, "jid" => job["jid"], "queue" => queue)
    yield
  end
end

Sidekiq.configure_server do |config|
  config.redis = {url: ENV["REDIS_URL"]}
  config.server_middleware do |chain|
    chain.add RecordServerMiddleware, "server"
  end
  config.on(:startup) { ShimRecord.add("shim:events", "event" => "startup", "server" => Sidekiq.server?) }
  config.error_handlers << ->(error, _context) { ShimRecord.add("shim:errors", "error" => error.message) }
  config.options[:concurrency] = 3
  config.average_scheduled_poll_interval = 2
end

Sidekiq.configure_client do |config|
  config.redis = {url: ENV["REDIS_URL"]}
  config.client_middleware do |chain|
    chain.add StampClientMiddleware
  end
end

class ShimHardWorker
  include Sidekiq::Worker
  sidekiq_options queue: "shim", retry: 1

  def perform(name, count)
    raise ArgumentError, "failing as asked" if name == "fail"

    ShimRecord.add("shim:ran", "class" => self.class.name, "jid" => jid, "args" => [name, count], "logger" => logger.class.name)
  end
end

class ShimJob
  include Sidekiq::Job

  def perform(value)
    Sidekiq.redis { |conn| conn.set("shim:job", value) }
  end
end
