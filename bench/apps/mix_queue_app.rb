# frozen_string_literal: true

# The app bench/mix.rb runs under our server:
#   ruby exe/queue -c 10 -r bench/apps/mix_queue_app.rb   (REDIS_URL, BENCH_* set: bench/apps/mix_work.rb)
require_relative "queue_config"
require_relative "mix_work"

class MixQueueJob
  include JobQueue::Worker

  def perform(id)
    MixWork.perform(id)
  end
end
