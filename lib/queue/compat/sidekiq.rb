# frozen_string_literal: true

# `require "queue/compat/sidekiq"`: an app written for Sidekiq 6.4 keeps its `include Sidekiq::Worker`
# classes, `Sidekiq.configure_server`/`configure_client` blocks, `Sidekiq.redis`, `Sidekiq::Client`
# and `Sidekiq::Testing` calls after it drops the sidekiq gem; each maps onto JobQueue's. What has no
# equivalent raises NotImplementedError (or ArgumentError for a setting) naming what to use instead.
#
# Once loaded, the app's own `require "sidekiq"`, `"sidekiq/testing"`, … load this shim's stubs
# (lib/queue/compat/require_stubs/sidekiq) instead of the gem.
require_relative "../compat"

if defined?(Sidekiq) && !(Sidekiq.respond_to?(:queue_compat?) && Sidekiq.queue_compat?)
  raise JobQueue::Compat::GemLoaded,
    "queue/compat/sidekiq: the sidekiq gem is already loaded. Its own Sidekiq::Worker classes run " \
    "unchanged on `bundle exec queue` (README, \"Moving from Sidekiq\"); the shim is for apps without " \
    "the sidekiq gem. Remove `require \"queue/compat/sidekiq\"`, or drop the sidekiq gem (and its require)."
end

require_relative "sidekiq/options"
require_relative "sidekiq/worker"
require_relative "sidekiq/iterable_job"
require_relative "sidekiq/client"
require_relative "sidekiq/module"

JobQueue::Compat.add_require_stubs("sidekiq")

# Sidekiq.redis is JobQueue.redis, whose connections are the redis gem's: say so now, not when a job
# first calls it.
unless (missing = JobQueue::RedisPool.missing_gems).empty?
  JobQueue.logger.warn(
    "queue/compat/sidekiq: Sidekiq.redis and Sidekiq.redis_pool need the redis and connection_pool gems; " \
    "not loadable here: #{missing.join(", ")}. Add #{missing.map { |name| "gem \"#{name}\"" }.join(" and ")} to the " \
    "Gemfile, or a job that calls Sidekiq.redis fails with LoadError (and goes to its retries)"
  )
end
