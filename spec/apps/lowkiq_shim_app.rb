# frozen_string_literal: true

# A Lowkiq app, as written for Lowkiq, that dropped the lowkiq gem: the only new line is the shim's
# require. Run by our server (`queue -r` this file) and used by a plain `ruby` client process
# (spec/compat/lowkiq_shim_spec.rb).
require "queue/compat/lowkiq"
require "lowkiq"
require "redis"

module LowkiqShimRecord
  def self.redis
    Thread.current[:lowkiq_shim_record] ||= Redis.new(path: ENV.fetch("REDIS_URL").delete_prefix("unix://"))
  end

  def self.add(list, entry)
    redis.rpush(list, Marshal.dump(entry))
  end
end

Lowkiq.redis = -> { Redis.new url: ENV.fetch("REDIS_URL") }
Lowkiq.threads_per_node = 2
Lowkiq.poll_interval = 0.05

Lowkiq.server_middlewares << lambda do |worker, batch, &block|
  LowkiqShimRecord.add("lowkiq:middleware", {worker: worker.name, ids: batch.keys})
  block.call
end

Lowkiq.client_middlewares << lambda do |worker, batch, &block|
  LowkiqShimRecord.add("lowkiq:client", {worker: worker.name, size: batch.size})
  block.call
end

Lowkiq.format_error = ->(error) { "#{error.message} (formatted)" }
Lowkiq.on_server_init = -> { LowkiqShimRecord.add("lowkiq:init", {pid: Process.pid}) }
Lowkiq.build_scheduler = -> { Lowkiq.build_seq_scheduler }

module OrderSyncWorker
  extend Lowkiq::Worker

  self.shards_count = 4
  self.batch_size = 5

  # Lowkiq's README: ids computed from the payload (Symbol keys, which Marshal keeps).
  def self.perform_async(jobs)
    jobs.each { |job| job.merge! id: job[:payload][:id] }
    super
  end

  def self.perform(payloads_by_id)
    payloads_by_id.each do |id, payloads|
      LowkiqShimRecord.add("lowkiq:ran", {id: id, payloads: payloads})
    end
  end
end

# Fails every run: one retry, then the oldest payload goes to the morgue.
module DoomedWorker
  extend Lowkiq::Worker

  self.max_retry_count = 1

  def self.retry_in(_count) = 0

  def self.perform(payloads_by_id)
    LowkiqShimRecord.add("lowkiq:doomed", {ids: payloads_by_id.keys})
    raise "doomed #{payloads_by_id.keys.join(",")}"
  end

  def self.retries_exhausted(batch)
    LowkiqShimRecord.add("lowkiq:exhausted", batch)
  end
end

Lowkiq.workers = [OrderSyncWorker, DoomedWorker]
