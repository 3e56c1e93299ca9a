#!/usr/bin/env ruby
# frozen_string_literal: true

# Redis sizing figures for README "Running in production": memory per waiting job (queued, and
# scheduled), and Redis CPU per push, on a redis-server of the benchmark's own.
#
#   ruby bench/redis_sizing.rb          # N=100000 queued, M=20000 one by one and scheduled
#
# The job is a typical small one: a worker class name, two arguments (an id and a short string), and
# the fields every push adds (jid, created_at, enqueued_at, retry, queue).
require "json"
require_relative "lib/redis_server"
require "redis"
require "queue"

N = Integer(ENV.fetch("N", "100000"))
M = Integer(ENV.fetch("M", "20000"))

class WelcomeMailWorker
  include JobQueue::Worker

  def perform(user_id, kind); end
end

redis = Bench::RedisServer.new.start
begin
  JobQueue.configure { |c| c.redis = {url: redis.url} }
  client = redis.client
  memory = -> { client.info("memory").fetch("used_memory").to_i }
  measure = lambda do |count, &push|
    mem = memory.call
    cpu = redis.cpu_seconds
    push.call
    [(memory.call - mem).fdiv(count), (redis.cpu_seconds - cpu) * 1e6 / count]
  end

  WelcomeMailWorker.perform_async(0, "warm-up") # loads the scripts, opens the connection
  client.flushall

  queued_bytes, bulk_cpu = measure.call(N) do
    WelcomeMailWorker.perform_bulk(Array.new(N) { |i| [1_000_000 + i, "welcome"] })
  end
  sample = client.lindex("queue:default", 0)
  client.flushall

  _, one_cpu = measure.call(M) { M.times { |i| WelcomeMailWorker.perform_async(1_000_000 + i, "welcome") } }
  client.flushall

  scheduled_bytes, = measure.call(M) { M.times { |i| WelcomeMailWorker.perform_in(3600, 1_000_000 + i, "welcome") } }

  puts "redis #{redis.version}, job JSON #{sample.bytesize} bytes: #{sample}"
  puts format("memory per queued job:    %.0f bytes (%d jobs in queue:default)", queued_bytes, N)
  puts format("memory per scheduled job: %.0f bytes (%d jobs in schedule)", scheduled_bytes, M)
  puts format("Redis CPU per push, bulk (1000 a batch): %.1f µs", bulk_cpu)
  puts format("Redis CPU per push, one by one:          %.1f µs", one_cpu)
ensure
  redis.stop
end
