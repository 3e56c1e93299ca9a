# frozen_string_literal: true

# App for spec/api/dedup_spec.rb and spec/reliability/dedup_race_spec.rb: deduplicated workers. A
# server middleware records every job of theirs as `perform` sees it (fields deduplication adds
# included); gated jobs wait for the spec to open their gate. With DEDUP_IN_ENGINE set there is no
# middleware, so the engine runs the jobs itself (Fetcher#run) and releases their keys; `perform`
# records what it can see then, and whether the job came through Processor#perform_job.
require_relative "basic"

JobQueue.config.namespace = ENV["DEDUP_NAMESPACE"] if ENV["DEDUP_NAMESPACE"]

module DedupRecord
  FIELDS = %w[class jid args idempotency_key duplicate-of rescheduled_once wal_locations].freeze

  def self.call(_worker, job, _queue)
    Record.redis.rpush("dedup:started", JSON.generate(job.slice(*FIELDS).merge("at" => Time.now.to_f)))
    yield
  end

  IN_ENGINE = ENV.key?("DEDUP_IN_ENGINE")

  # With no middleware to record the job, `perform` records it (without the fields only the job
  # Hash has).
  def self.performing(worker, arg)
    return unless IN_ENGINE

    via_process = caller_locations.any? { |frame| frame.label.end_with?("perform_job") }
    Record.redis.rpush("dedup:started", JSON.generate("class" => worker.class.name, "jid" => worker.jid, "args" => [arg],
      "at" => Time.now.to_f, "via_process" => via_process))
  end

  # Waits (at most 10 s) until the spec opens the gate named by the job's argument.
  def self.gate(arg)
    Record.redis.blpop("dedup:gate:#{arg}", timeout: 10) if arg.to_s.start_with?("gated")
  end
end

class DedupRecordMiddleware
  def call(worker, job, queue, &block)
    DedupRecord.call(worker, job, queue, &block)
  end
end

unless DedupRecord::IN_ENGINE
  JobQueue.configure_server do |config|
    config.server_middleware { |chain| chain.add(DedupRecordMiddleware) }
  end
end

class DedupExecutingWorker
  include JobQueue::Worker
  deduplicate :until_executing
  idempotent!

  def perform(arg)
    DedupRecord.performing(self, arg)
    DedupRecord.gate(arg)
  end
end

class DedupExecutedWorker
  include JobQueue::Worker
  deduplicate :until_executed, if_deduplicated: :reschedule_once
  idempotent!

  def perform(arg)
    DedupRecord.performing(self, arg)
    DedupRecord.gate(arg)
    raise ArgumentError, "asked to fail" if arg == "fail"
  end
end

class DedupMarkedWorker
  include JobQueue::Worker
  deduplicate :until_executing

  def perform(arg) = nil
end

class DedupNarrowWorker
  include JobQueue::Worker
  idempotent!

  def self.idempotency_arguments(args) = args.first(1)

  def perform(id, _noise) = nil
end

class DedupScheduledWorker
  include JobQueue::Worker
  idempotent!
  deduplicate :until_executing, including_scheduled: true, ttl: 600

  def perform(arg) = nil
end

class DedupShortWorker
  include JobQueue::Worker
  idempotent!
  deduplicate :until_executing, ttl: 1

  def perform(arg) = nil
end

class DedupPlainWorker
  include JobQueue::Worker

  def perform(arg) = nil
end

# For the race spec: a job that takes a moment, pushed from many threads at once.
class DedupRaceWorker
  include JobQueue::Worker
  idempotent!

  def perform(_arg) = sleep(0.002)
end

class DedupRaceRescheduleWorker
  include JobQueue::Worker
  deduplicate :until_executed, if_deduplicated: :reschedule_once
  idempotent!

  def perform(_arg) = sleep(0.002)
end

# Pushes `worker` with the same argument `times` times from `threads` threads of this process, then
# records when its last push began (a server may start the job it queued before the push returns, so
# "after the last push" means after it began).
def dedup_race_push(worker, times, threads)
  Array.new(threads) do |t|
    Thread.new do
      began = nil
      ((times + threads - 1 - t) / threads).times do
        began = Time.now.to_f
        worker.perform_async("same")
      end
      Record.redis.rpush("dedup:race:last_push", began.to_s)
    end
  end.each(&:join)
end
