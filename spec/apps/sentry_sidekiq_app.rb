# frozen_string_literal: true

# A Sidekiq 6.4 app reporting to Sentry through sentry-sidekiq 5.3 (the Debian gems), as its
# Gemfile and initializer have it, run by our server (`queue -r` this file). Without the sidekiq gem
# the only new line is the shim's require; with SENTRY_APP_KEEPS_SIDEKIQ_GEM=1 it keeps the real gem
# (whose Sidekiq.configure_server blocks our server honours, lib/queue/sidekiq_gem.rb).
#
# Sentry sends nowhere: its own in-process DummyTransport keeps the events (errors and
# transactions). The app's error handler (registered after sentry-sidekiq's) and a shutdown hook move
# what it kept to Redis, for spec/ecosystem/sentry_sidekiq_spec.rb to read.
require "queue/compat/sidekiq" unless ENV["SENTRY_APP_KEEPS_SIDEKIQ_GEM"] == "1"
require "sidekiq"
require "sentry-ruby"
require "sentry-sidekiq"
require "redis"
require "json"

Sentry.init do |config|
  config.dsn = "http://12345@localhost/1" # never contacted: DummyTransport below
  config.transport.transport_class = Sentry::DummyTransport
  config.background_worker_threads = 0
  config.traces_sample_rate = 1.0
  config.sidekiq.report_after_job_retries = ENV["SENTRY_REPORT_AFTER_JOB_RETRIES"] == "1"
end

module SentryRecord
  MUTEX = Mutex.new

  def self.redis
    Thread.current[:sentry_record] ||= Redis.new(path: ENV.fetch("REDIS_URL").delete_prefix("unix://"))
  end

  def self.transport = Sentry.get_current_client.transport

  # Moves the events the transport kept to the Redis list sentry:events.
  def self.drain
    taken = MUTEX.synchronize { transport.events.shift(transport.events.size) }
    taken.each { |event| redis.rpush("sentry:events", JSON.generate(event.to_hash)) }
  end
end

Sidekiq.configure_server do |config|
  config.redis = {url: ENV["REDIS_URL"]}
  config.error_handlers << ->(_error, _context) { SentryRecord.drain }
  config.on(:shutdown) { SentryRecord.drain }
end

class SentryFailingWorker
  include Sidekiq::Worker
  sidekiq_options queue: "sentry", retry: 2

  def perform(order, amount, options)
    Sentry.get_current_scope.set_extras(order: order)
    raise ArgumentError, "order #{order} failed for #{amount} with #{options.inspect}"
  end
end

class SentryOkWorker
  include Sidekiq::Worker
  sidekiq_options queue: "sentry"

  def perform(name)
    SentryRecord.redis.rpush("sentry:ok", name)
  end
end
