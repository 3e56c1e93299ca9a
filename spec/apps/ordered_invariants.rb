# frozen_string_literal: true

# App for spec/reliability/ordered_invariants_spec.rb: one ordered worker that records every run in
# the test Redis, fails some of them, and does a little work so that two runs of one id would overlap.
#
# Each run writes two records to the list `inv:runs` (JSON):
#   {"run", "pid", "thread", "at", "seen" => {id => [version, ...]}}   when `perform` starts
#   {"run", "end", "ok"}                                                 just before it returns or raises
# `at` and `end` are CLOCK_MONOTONIC, one clock for every process of the machine. A payload is
# {"v" => version}, pushed with score = version, so the versions a run sees are the scores it got.
require_relative "basic"
require "zlib"

JobQueue.configure_server { |config| config.ordered_poll_interval = 0.02 }

module OrderedInvariantWorker
  extend JobQueue::OrderedWorker
  self.shards_count = 10 # one per thread of the two processes
  self.batch_size = 3
  self.max_retry_count = 2 # the third failure in a row sends the oldest payload to the morgue

  RUNS = "inv:runs"
  BY_PID = "inv:by_pid"
  EXHAUSTED = "inv:exhausted"
  SEED = Integer(ENV.fetch("INV_SEED", "1"))
  FAIL_PERCENT = 5
  # Every run that holds the last version of these ids fails: they always reach the morgue.
  DOOMED_EVERY = 400
  LAST_VERSION = 10

  def self.retry_in(_count) = 0.2

  def self.perform(payloads_by_id)
    token = "#{Process.pid}:#{Thread.current.name}:#{next_run}"
    seen = payloads_by_id.transform_values { |payloads| payloads.map { |payload| payload.fetch("v") } }
    Record.redis.pipelined do |r|
      r.rpush(RUNS, JSON.generate("run" => token, "pid" => Process.pid, "thread" => Thread.current.name, "at" => now, "seen" => seen))
      r.hincrby(BY_PID, Process.pid.to_s, 1)
    end
    sleep 0.001 # work: a second run of one of these ids now would overlap this one
    failure = failure_for(seen)
    Record.redis.rpush(RUNS, JSON.generate("run" => token, "end" => now, "ok" => failure.nil?))
    raise failure if failure
  end

  def self.retries_exhausted(batch)
    batch.each do |dead|
      Record.redis.rpush(EXHAUSTED, JSON.generate("id" => dead[:id], "v" => dead[:payloads].map { |payload, _score| payload["v"] }))
    end
  end

  # A deterministic pseudo-random ~5% of each thread's runs fail, and every run holding a doomed id's
  # last version.
  def self.failure_for(seen)
    doomed = seen.find { |id, versions| id.delete_prefix("id-").to_i % DOOMED_EVERY == 7 && versions.include?(LAST_VERSION) }
    return RuntimeError.new("doomed #{doomed.first}") if doomed
    return RuntimeError.new("random failure") if rng.rand(100) < FAIL_PERCENT

    nil
  end

  def self.rng
    Thread.current[:inv_rng] ||= Random.new(Zlib.crc32("#{SEED}:#{Process.pid}:#{Thread.current.name}"))
  end

  def self.next_run
    Thread.current[:inv_run] = (Thread.current[:inv_run] || 0) + 1
  end

  def self.now = Process.clock_gettime(Process::CLOCK_MONOTONIC)
end
