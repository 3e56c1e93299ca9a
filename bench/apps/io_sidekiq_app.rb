# frozen_string_literal: true

# The app bench/io_bound.rb runs under the real Sidekiq 6.4.1, at its best as in sidekiq_app.rb: a job
# that sleeps its one argument (seconds), then counts itself (blank_counter.rb).
require "logger"
require "sidekiq"
require_relative "blank_counter"

Redis.silence_deprecations = true if Redis.respond_to?(:silence_deprecations=)
Sidekiq.logger.level = Logger::WARN

class IoSleepJob
  include Sidekiq::Worker

  def perform(seconds)
    sleep seconds
    BlankCounter.tick
  end
end
