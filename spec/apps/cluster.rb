# frozen_string_literal: true

# Workers for `queue cluster` specs (spec/reliability/cluster_spec.rb). Each job records the pid of
# the process that ran it, so the spec can tell the children apart.
#
# Loaded once, in the cluster's parent, before it forks. With CLUSTER_PUSH_AT_BOOT set, loading it
# pushes a job through the engine (the parent's main thread opens its engine connection here), and
# each child pushes one from its main thread as it starts, so the spec can show that no child ever
# uses the parent's connection.
require_relative "basic"

# Records where it ran, then waits for the spec's `release` key (or `seconds`, when given).
class ClusterJobWorker
  include JobQueue::Worker

  def perform(label, seconds = nil)
    redis = Record.redis
    redis.rpush("started", JSON.generate("jid" => jid, "pid" => Process.pid, "label" => label))
    deadline = seconds && Process.clock_gettime(Process::CLOCK_MONOTONIC) + seconds
    sleep 0.01 until deadline ? Process.clock_gettime(Process::CLOCK_MONOTONIC) >= deadline : redis.exists?("release")
    redis.rpush("finished", JSON.generate("jid" => jid, "pid" => Process.pid, "label" => label))
  end
end

# Grows its process's memory by `mb` megabytes (kept until the process exits), then records it ran.
class ClusterHogWorker
  include JobQueue::Worker

  HELD = []

  def perform(mb)
    HELD << ("x" * (mb * 1024 * 1024))
    Record.redis.rpush("finished", JSON.generate("jid" => jid, "pid" => Process.pid, "label" => "hog"))
  end
end

# Pushes a job from inside a child (through that child's own engine connection).
class ClusterChainWorker
  include JobQueue::Worker

  def perform(label)
    ClusterJobWorker.set(queue: "chained").perform_async(label, 0)
    Record.redis.rpush("finished", JSON.generate("jid" => jid, "pid" => Process.pid, "label" => "chain"))
  end
end

if ENV["CLUSTER_PUSH_AT_BOOT"]
  ClusterJobWorker.set(queue: "boot").perform_async("pushed by the parent", 0)
  # Runs in each child's main thread: the thread whose per-thread engine connections were the
  # parent's before the fork.
  JobQueue.configure { |c| c.on(:startup) { ClusterJobWorker.set(queue: "boot").perform_async("pushed by a child at startup", 0) } }
end
