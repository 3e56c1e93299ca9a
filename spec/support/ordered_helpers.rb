# frozen_string_literal: true

require "zlib"

# Helpers for the ordered-worker specs: Lowkiq's v1 key names (WIRE.md §3), read straight from Redis,
# and an in-process ordered server (the real engine and leases, no server process) that runs one
# batch per `step`.
module OrderedHelpers
  IDENTITY = "spec-host:1:0123456789ab"

  # Defines a named ordered worker module; forgotten by the registry after the example.
  def ordered_worker(name, &body)
    worker = Module.new
    stub_const(name, worker)
    worker.extend(JobQueue::OrderedWorker)
    worker.module_eval(&body) if body
    ordered_workers_made << worker
    worker
  end

  def ordered_workers_made
    @ordered_workers_made ||= []
  end

  def lowkiq_key(worker, suffix)
    "lowkiq:A:v1:#{worker.queue_name}:#{suffix}"
  end

  def shard_of(id, shards_count)
    Zlib.crc32(id.to_s) % shards_count
  end

  # [[member, score], ...] of a sorted set, lowest score first.
  def zset(key)
    TestRedis.client.zrange(key, 0, -1, with_scores: true)
  end

  # The id's queued state as WIRE.md §3 lays it out, read back from every index.
  def queued_state(worker, id)
    redis = TestRedis.client
    shard = shard_of(id, worker.shards_count)
    {
      lex: redis.zscore(lowkiq_key(worker, "all_ids_lex"), id),
      perform_in: redis.zscore(lowkiq_key(worker, "all_ids_scored_by_perfrom_in"), id),
      shard_perform_in: redis.zscore(lowkiq_key(worker, "ids_scored_by_perform_in:#{shard}"), id),
      retry_count: redis.zscore(lowkiq_key(worker, "all_ids_scored_by_retry_count"), id),
      payloads: zset(lowkiq_key(worker, "payloads:#{id}"))
    }
  end

  # An ordered server for `workers` in this process, one processor thread (index 0 of 1).
  def ordered_server(*workers)
    JobQueue.config.concurrency = 1
    server = JobQueue::Ordered::Server.start(JobQueue.config, IDENTITY, workers: workers)
    ordered_servers << server
    server
  end

  def ordered_servers
    @ordered_servers ||= []
  end

  # Runs batches until none is due.
  def drain(work, max: 100)
    max.times { return unless work.step }
    raise "ordered work did not drain in #{max} steps"
  end
end

RSpec.configure do |config|
  config.include OrderedHelpers
  config.after do
    ordered_servers.each(&:stop)
    ordered_workers_made.each { |w| JobQueue::OrderedWorker.forget(w) }
  end
end
