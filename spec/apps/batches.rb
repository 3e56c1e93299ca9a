# frozen_string_literal: true

# App for spec/api/batch_spec.rb: batch jobs and callbacks that record what ran, in order, in Redis.
require_relative "basic"

# args: label, and a mode: "ok", "fail_once" (raises on its first run), "die" (raises, no retries).
class BatchJob
  include JobQueue::Worker
  sidekiq_options queue: "batch"

  def perform(label, mode = "ok")
    if mode == "fail_once" && Record.redis.incr("attempts:#{label}") == 1
      raise "first attempt of #{label}"
    end
    raise "#{label} dies" if mode == "die"

    Record.redis.rpush("ran", label)
  end
end

class DyingJob
  include JobQueue::Worker
  sidekiq_options queue: "batch", retry: false

  def perform(label)
    raise "#{label} dies"
  end
end

# Adds two more jobs to its own batch (reopening) before it ends.
class ReopeningJob
  include JobQueue::Worker
  sidekiq_options queue: "batch"

  def perform(label)
    batch.jobs do
      BatchJob.perform_async("#{label}-a")
      BatchJob.perform_async("#{label}-b")
    end
    Record.redis.rpush("ran", label)
  end
end

# Creates a child batch (level + 1) inside its own batch's jobs block, down to level 3.
class NestingJob
  include JobQueue::Worker
  sidekiq_options queue: "batch"

  def perform(level)
    Record.redis.rpush("ran", "nest#{level}")
    return if level >= 3

    batch.jobs do
      child = JobQueue::Batch.new
      child.description = "level#{level + 1}"
      child.on(:complete, BatchCallbacks, "level" => level + 1)
      child.on(:success, "BatchCallbacks#done", "level" => level + 1)
      child.jobs { NestingJob.perform_async(level + 1) }
    end
  end
end

class BatchCallbacks
  def on_complete(status, options)
    Record.redis.rpush("callbacks", "complete:#{status.description}:#{options.to_a.flatten.join("=")}")
  end

  def on_success(status, _options)
    Record.redis.rpush("callbacks", "success:#{status.description}:#{status.pending}")
  end

  def on_death(status, _options)
    Record.redis.rpush("callbacks", "death:#{status.description}:#{status.dead}")
  end

  def done(status, options)
    Record.redis.rpush("callbacks", "success:#{status.description}:#{options.to_a.flatten.join("=")}")
  end
end
