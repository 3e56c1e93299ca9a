# frozen_string_literal: true

# The app bench/cluster.rb runs under the real Sidekiq 6.4.1 (one or two `sidekiq` processes), at its
# best as in sidekiq_app.rb: a blank job and a job that sleeps 1 ms, counted per process.
require "logger"
require "sidekiq"
require_relative "cluster_counter"

Redis.silence_deprecations = true if Redis.respond_to?(:silence_deprecations=)
Sidekiq.logger.level = Logger::WARN

class SidekiqBlankJob
  include Sidekiq::Worker

  def perform
    ClusterCounter.tick
  end
end

class SidekiqSleepJob
  include Sidekiq::Worker

  def perform
    sleep 0.001
    ClusterCounter.tick
  end
end
