# frozen_string_literal: true

# The app bench/mix.rb runs under the real Sidekiq 6.4.1:
#   ruby -S sidekiq -c 10 -r bench/apps/mix_sidekiq_app.rb   (REDIS_URL, BENCH_* set: bench/apps/mix_work.rb)
# Sidekiq at its best, as in sidekiq_app.rb: deprecation warnings silenced, logging at WARN.
require "logger"
require "sidekiq"
require_relative "mix_work"

Sidekiq.logger.level = Logger::WARN

class MixSidekiqJob
  include Sidekiq::Worker

  def perform(id)
    MixWork.perform(id)
  end
end
