# frozen_string_literal: true

# A Sidekiq 6.4.1 app that keeps the sidekiq gem and runs on `queue -r` this file: its
# Sidekiq.configure_server block sets the Redis (SIDEKIQ_APP_REDIS_URL; REDIS_URL leads nowhere in
# spec/compat/sidekiq_gem_server_spec.rb), a server middleware chain, error and death handlers and
# lifecycle hooks, each recording what it saw in that Redis.
require "sidekiq"
require "json"
require "redis"

Redis.silence_deprecations = true if Redis.respond_to?(:silence_deprecations=)

module GemServerRecord
  KEY = "sidekiq_gem:seen"

  def self.add(entry)
    redis.rpush(KEY, JSON.generate(entry))
  end

  def self.redis
    Thread.current[:gem_server_record] ||= Redis.new(url: ENV.fetch("SIDEKIQ_APP_REDIS_URL"))
  end
end

class GemServerMiddleware
  def initialize(label)
    @label = label
  end

  def call(worker, job, queue)
    GemServerRecord.add("middleware" => @label, "class" => worker.class.name, "jid" => job["jid"], "queue" => queue)
    yield
  end
end

class GemServerInnerMiddleware < GemServerMiddleware; end

Sidekiq.configure_server do |config|
  config.redis = {url: ENV.fetch("SIDEKIQ_APP_REDIS_URL")}
  config.server_middleware do |chain|
    chain.add GemServerMiddleware, "first"
    chain.insert_after GemServerMiddleware, GemServerInnerMiddleware, "second"
  end
  config.error_handlers << ->(error, context) { GemServerRecord.add("error_handler" => error.message, "jid" => context[:job]&.fetch("jid")) }
  config.death_handlers << ->(job, error) { GemServerRecord.add("death_handler" => error.message, "jid" => job["jid"]) }
  config.on(:startup) { GemServerRecord.add("event" => "startup", "concurrency" => Sidekiq.options[:concurrency]) }
  config.on(:shutdown) { GemServerRecord.add("event" => "shutdown") }
end

class GemServerWorker
  include Sidekiq::Worker
  sidekiq_options queue: "gem_server", retry: 0

  def perform(what)
    raise ArgumentError, "failing as asked" if what == "fail"

    GemServerRecord.add("ran" => jid, "server" => Sidekiq.server?)
  end
end
