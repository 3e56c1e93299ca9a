# frozen_string_literal: true

# The app our server loads (`exe/queue -r spec/apps/compat_queue.rb`) in the compat specs. The spec
# process loads it too, for our client's side of the same workers. compat_sidekiq.rb has Sidekiq
# workers of the same names, so a job pushed for one of these can be run by either server.
require "queue"
require_relative "compat_record"

JobQueue.configure { |c| c.redis = {url: ENV["REDIS_URL"]} } if ENV["REDIS_URL"]
JobQueue.config.logger.level = ENV["COMPAT_LOG_LEVEL"] if ENV["COMPAT_LOG_LEVEL"]
JobQueue.configure_server do |config|
  config.server_middleware { |chain| chain.add CompatRecord::Capture }
end

# Raised by the failing workers below: a class of the app's own, so its name is checkable.
class CompatError < StandardError; end

# Records its arguments.
class CompatEcho
  include JobQueue::Worker

  def perform(*args)
    CompatRecord.ran("queue #{JobQueue::VERSION}", self, args)
  end
end

# Fails until the spec sets the key "compat:marker:<jid>", then records its arguments.
class CompatFlaky
  include JobQueue::Worker

  def perform(*args)
    unless CompatRecord.redis.exists?("compat:marker:#{jid}")
      raise CompatError, "no marker for #{jid} yet: ✗ \"quoted\"\ttab \u0001"
    end

    CompatRecord.ran("queue #{JobQueue::VERSION}", self, args)
  end
end

# Always fails, and is never retried: its first failure goes to the dead set.
class CompatDoomed
  include JobQueue::Worker
  sidekiq_options retry: 0

  def perform(*_args)
    raise CompatError, "doomed"
  end
end

# Always fails, with one retry, keeping the whole backtrace. Records the backtrace of each failure
# (under "compat:backtraces:<jid>"), so the spec can compare it with what the retry and dead sets decode.
class CompatTraced
  include JobQueue::Worker
  sidekiq_options retry: 1, backtrace: true

  def perform(*args)
    explode(args)
  rescue CompatError => e
    CompatRecord.redis.rpush("compat:backtraces:#{jid}", JSON.generate(e.backtrace))
    raise
  end

  private

  def explode(args)
    raise CompatError, "traced #{args.inspect}"
  end
end

# Keeps only the first two backtrace lines.
class CompatShortTraced < CompatTraced
  sidekiq_options retry: 0, backtrace: 2
end

# Blocks until the spec pushes to "compat:release:<jid>", then records its arguments.
class CompatBlocker
  include JobQueue::Worker

  def perform(*args)
    CompatRecord.redis.rpush("compat:started", jid)
    CompatRecord.redis.blpop("compat:release:#{jid}", timeout: 60) or raise CompatError, "never released"
    CompatRecord.ran("queue #{JobQueue::VERSION}", self, args)
  end
end

# The spec process pushes these names with Sidekiq::Worker classes of its own; only our server needs
# them as workers.
if JobQueue.server?
  class SidekiqEcho < CompatEcho; end
end
