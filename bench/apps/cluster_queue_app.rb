# frozen_string_literal: true

# The app bench/cluster.rb runs under `queue` and `queue cluster -n 2`: a blank job and a job that
# sleeps 1 ms, each counted per process (cluster_counter.rb).
require_relative "queue_config"
require_relative "cluster_counter"

class QueueBlankJob
  include JobQueue::Worker

  def perform
    ClusterCounter.tick
  end
end

class QueueSleepJob
  include JobQueue::Worker

  def perform
    sleep 0.001
    ClusterCounter.tick
  end
end
