# frozen_string_literal: true

# The app the throughput benchmark runs under the real Sidekiq 6.4.1:
#   ruby -S sidekiq -c 10 -r bench/apps/sidekiq_app.rb   (REDIS_URL, BENCH_N, BENCH_DONE set)
# Sidekiq at its best: redis 4.8's per-command deprecation warnings silenced, logging at WARN (no
# start/done line per job). Sidekiq reads REDIS_URL itself.
require "logger"
require "sidekiq"
require_relative "blank_counter"

Redis.silence_deprecations = true if Redis.respond_to?(:silence_deprecations=)
Sidekiq.logger.level = Logger::WARN

class SidekiqBlankJob
  include Sidekiq::Worker

  def perform
    BlankCounter.tick
  end
end
