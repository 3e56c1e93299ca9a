# frozen_string_literal: true

# The app a real Sidekiq 6.4.1 process loads (`sidekiq -r spec/apps/compat_sidekiq.rb`) in the compat
# specs. Its workers have the names of the workers in compat_queue.rb, so jobs our client pushes for
# them are run here.
require "sidekiq"
require_relative "compat_record"

Redis.silence_deprecations = true if Redis.respond_to?(:silence_deprecations=)

Sidekiq.configure_server do |config|
  config.redis = {url: ENV.fetch("REDIS_URL")}
  # Poll the schedule every second or so (on average), and without the 10 s initial pause: the
  # specs wait for scheduled jobs to run.
  config.options[:poll_interval_average] = 1
  config.server_middleware { |chain| chain.add CompatRecord::Capture }
end

class CompatEcho
  include Sidekiq::Worker

  def perform(*args)
    CompatRecord.ran("sidekiq #{Sidekiq::VERSION}", self, args)
  end
end

# Raised by the failing workers below, as in compat_queue.rb.
class CompatError < StandardError; end

# Fails until the spec sets the key "compat:marker:<jid>" (same as compat_queue.rb's).
class CompatFlaky
  include Sidekiq::Worker

  def perform(*args)
    unless CompatRecord.redis.exists?("compat:marker:#{jid}")
      raise CompatError, "no marker for #{jid} yet: ✗ \"quoted\"\ttab \u0001"
    end

    CompatRecord.ran("sidekiq #{Sidekiq::VERSION}", self, args)
  end
end

# Always fails, and is never retried (same as compat_queue.rb's).
class CompatDoomed
  include Sidekiq::Worker
  sidekiq_options retry: 0

  def perform(*_args)
    raise CompatError, "doomed"
  end
end
