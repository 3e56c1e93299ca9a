# frozen_string_literal: true

# App for spec/reliability/limits_spec.rb: workers with concurrency and rate limits, each recording
# its starts, and how many of its jobs run at once (an INCR/DECR counter whose peak is kept in the
# same atomic step, so every start samples it).
require_relative "basic"

module LimitsApp
  # INCR `running`, keep the peak in `peak`; returns the new count.
  ENTER = "local n = redis.call('INCR', KEYS[1]) " \
          "if n > tonumber(redis.call('GET', KEYS[2]) or '0') then redis.call('SET', KEYS[2], n) end return n"

  def self.enter(name)
    Record.redis.eval(ENTER, keys: ["limits:running:#{name}", "limits:peak:#{name}"])
  end

  def self.leave(name)
    Record.redis.decr("limits:running:#{name}")
  end

  def self.record(list, fields)
    Record.redis.rpush(list, JSON.generate(fields.merge("pid" => Process.pid, "at" => Time.now.to_f)))
  end

  # Runs the block counted under `name`, recorded as started in `limits:started:<name>`.
  def self.counted(name, fields, seconds)
    enter(name)
    record("limits:started:#{name}", fields)
    sleep seconds
  ensure
    leave(name)
  end
end

class TwoAtATimeWorker
  include JobQueue::Worker
  sidekiq_options queue: "limited"
  concurrency_limit 2

  def perform(n) = LimitsApp.counted("two", {"n" => n}, 0.02)
end

class PerAccountWorker
  include JobQueue::Worker
  sidekiq_options queue: "keyed"
  concurrency_limit 1, key: ->(account, *) { account }

  def perform(account, n) = LimitsApp.counted("account:#{account}", {"account" => account, "n" => n}, 0.02)
end

# A limit wide enough for processes to lease slots (queue_core limits/lease.rs), still below the
# threads of two processes, with a rate limit that leases tokens too.
class WideWorker
  include JobQueue::Worker
  sidekiq_options queue: "wide"
  concurrency_limit 16
  rate_limit 100_000, per: 1

  def perform(n) = LimitsApp.counted("wide", {"n" => n}, 0.002)
end

# Jobs of another class in WideWorker's queue, without limits: a thread that runs one after a
# WideWorker job must give back the slot it kept for a next WideWorker job as this one starts.
class WideNeighbourWorker
  include JobQueue::Worker
  sidekiq_options queue: "wide"

  def perform(n) = LimitsApp.counted("neighbour", {"n" => n}, 0.002)
end

# Its limit is read from Redis (a lambda, as GitLab's feature-flagged limits are): 0 holds its jobs.
class GatedWorker
  include JobQueue::Worker
  sidekiq_options queue: "gated"
  # Read in the server process, which has REDIS_URL. The lambda is registered in whatever process loads
  # this file, so an in-process Launcher of another spec evaluates it too: there it is 0, not an error.
  concurrency_limit -> { ENV.key?("REDIS_URL") ? Record.redis.get("limits:gate").to_i : 0 }

  def perform(n) = LimitsApp.counted("gated", {"n" => n}, 0)
end

# Runs until `limits:block` is deleted (at most 60 s), so a process can be killed holding its slots.
class BlockingWorker
  include JobQueue::Worker
  sidekiq_options queue: "blocking"
  concurrency_limit 2

  def perform(n)
    LimitsApp.record("limits:started:blocking", "n" => n)
    deadline = Time.now + 60
    sleep 0.01 while Record.redis.exists?("limits:block") && Time.now < deadline
    LimitsApp.record("limits:finished:blocking", "n" => n)
  end
end

class WindowRatedWorker
  include JobQueue::Worker
  sidekiq_options queue: "rated"
  rate_limit 10, per: 2

  def perform(n) = LimitsApp.record("limits:started:window", "n" => n, "retry_count" => nil)
end

class BucketRatedWorker
  include JobQueue::Worker
  sidekiq_options queue: "rated"
  rate_limit 10, per: 2, kind: :bucket

  def perform(n) = LimitsApp.record("limits:started:bucket", "n" => n)
end
