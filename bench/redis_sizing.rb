#!/usr/bin/env ruby
# frozen_string_literal: true

# Redis sizing figures for README "Running in production" and "Sizing": memory per waiting job
# (queued, and scheduled), Redis CPU per push, and Redis CPU per job for a job's whole life in Redis
# (pushed, fetched and acknowledged by a real `queue -c 10` server running at the same time), on a
# redis-server of the benchmark's own.
#
#   ruby bench/redis_sizing.rb          # N=100000 queued, M=20000 one by one and scheduled, C=20000 cycles
#
# The job is a typical small one: a worker class name, two arguments (an id and a short string), and
# the fields every push adds (jid, created_at, enqueued_at, retry, queue).
require "json"
require "tmpdir"
$LOAD_PATH.unshift(File.expand_path("../lib", __dir__))
require_relative "lib/redis_server"
require_relative "lib/server"
require "redis"
require "queue"

N = Integer(ENV.fetch("N", "100000"))
M = Integer(ENV.fetch("M", "20000"))
C = Integer(ENV.fetch("C", "20000"))

class WelcomeMailWorker
  include JobQueue::Worker

  def perform(user_id, kind); end
end

# The blank job bench/apps/queue_app.rb runs; here it is only pushed.
class QueueBlankJob
  include JobQueue::Worker
end

# Redis CPU per job for C jobs pushed (by the block) while a `queue -c 10` server fetches and
# acknowledges them, from the first push until the server has run the last: the whole cycle.
def cycle_cpu(redis, count)
  done = File.join(Dir.mktmpdir("queue-sizing"), "done")
  server = Bench::Server.new(:queue, redis, app: "queue_app.rb", args: ["-c", "10"], env: {"BENCH_N" => count.to_s, "BENCH_DONE" => done}).start
  server.wait_for("the server's heartbeat", interval: 0.05, timeout: 60) { redis.client.scard("processes").positive? }
  cpu = redis.cpu_seconds
  yield
  server.wait_for("the jobs to run", interval: 0.01) { File.exist?(done) }
  (redis.cpu_seconds - cpu) * 1e6 / count
ensure
  server&.stop
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
  client.flushall

  cycle_one = cycle_cpu(redis, C) { C.times { QueueBlankJob.perform_async } }
  client.flushall
  cycle_bulk = cycle_cpu(redis, C) { C.times.each_slice(1000) { |s| QueueBlankJob.perform_bulk(Array.new(s.size) { [] }) } }

  puts "redis #{redis.version}, job JSON #{sample.bytesize} bytes: #{sample}"
  puts format("memory per queued job:    %.0f bytes (%d jobs in queue:default)", queued_bytes, N)
  puts format("memory per scheduled job: %.0f bytes (%d jobs in schedule)", scheduled_bytes, M)
  puts format("Redis CPU per push, bulk (1000 a batch): %.1f µs", bulk_cpu)
  puts format("Redis CPU per push, one by one:          %.1f µs", one_cpu)
  puts format("Redis CPU per job, whole cycle (push one by one + fetch + ack, -c 10 server): %.1f µs → %.0f jobs/s per Redis core", cycle_one, 1e6 / cycle_one)
  puts format("Redis CPU per job, whole cycle (bulk push + fetch + ack, -c 10 server):       %.1f µs → %.0f jobs/s per Redis core", cycle_bulk, 1e6 / cycle_bulk)
ensure
  redis.stop
end
