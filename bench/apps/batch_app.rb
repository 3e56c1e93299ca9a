# frozen_string_literal: true

# The app bench/batch.rb runs under our server: the throughput app's blank job (queue_app.rb), a
# success callback that writes when it started (BENCH_SUCCESS), and, for the latency rounds, a job
# that records when it ended and a callback that records when it started, per batch, in Redis.
require_relative "queue_app"
require "redis"

module BatchBench
  def self.redis
    Thread.current[:batch_bench_redis] ||= Redis.new(url: ENV.fetch("REDIS_URL"))
  end

  def self.now = Process.clock_gettime(Process::CLOCK_REALTIME)
end

class BatchBenchDone
  def on_success(_status, _options)
    File.write(ENV.fetch("BENCH_SUCCESS"), BatchBench.now.to_s)
  end
end

class LatencyJob
  include JobQueue::Worker

  def perform
    BatchBench.redis.hset("ended:#{bid}", jid, BatchBench.now.to_s)
  end
end

class LatencyCallback
  def on_success(status, _options)
    BatchBench.redis.hset("callback_started", status.bid, BatchBench.now.to_s)
  end
end
