# frozen_string_literal: true

require_relative "throughput_run"

module Bench
  # The ordered worker as the benchmark process pushes it: the same queue name and shard count as
  # bench/apps/ordered_app.rb's; here it only pushes.
  module OrderedBlankJob
    extend JobQueue::OrderedWorker
    self.queue_name = "OrderedBlankJob"
    self.shards_count = 5
  end

  # One measured drain of N blank ordered jobs (distinct ids, so no merging) by `exe/queue -c
  # CONCURRENCY` with bench/apps/ordered_app.rb at batch size `batch`. Timed as ThroughputRun times a
  # plain drain: from the first id taken (ZCARD all_ids_lex drops below N) until the N-th id has run
  # and Lowkiq's `processed` counter, written by each batch's settle, reads N.
  class OrderedRun < ThroughputRun
    PUSH_SLICE = 1000

    def initialize(redis, jobs:, concurrency:, batch:)
      super(:"ordered_#{batch}", redis, jobs: jobs, concurrency: concurrency)
      @batch = batch
    end

    private

    def server_kind = :queue

    def app_file = "ordered_app.rb"

    def key(suffix) = "lowkiq:A:v1:#{OrderedBlankJob.queue_name}:#{suffix}"

    def prepare
      @redis.client.flushall
      File.delete(@done_file) if File.exist?(@done_file)
      @jobs.times.each_slice(PUSH_SLICE) { |ids| OrderedBlankJob.perform_async(ids.map { |id| {id: id} }) }
      raise "expected #{@jobs} ordered ids queued, found #{queue_length}" unless queue_length == @jobs
    end

    def env
      super.merge("BENCH_BATCH" => @batch.to_s)
    end

    def queue_length
      @redis.client.zcard(key("all_ids_lex"))
    end

    def finished?
      File.exist?(@done_file) && @redis.client.get(key("processed")).to_i >= @jobs
    end

    # Every id ran exactly once, none failed, nothing is left queued, in processing or in the morgue.
    def verify!
      r = @redis.client
      ran = File.exist?(@done_file) ? File.read(@done_file).to_i : 0
      processed = r.get(key("processed")).to_i
      failed = r.get(key("failed")).to_i
      left = queue_length + r.zcard(key("morgue:all_ids_lex")) + r.keys(key("processing:payloads:*")).size
      return if ran == @jobs && processed == @jobs && failed.zero? && left.zero?

      raise "#{@kind}: ran #{ran}, processed #{processed}, failed #{failed}, #{left} left queued, in processing " \
        "or in the morgue (expected #{@jobs} run and processed)\n#{@server.output}"
    end
  end
end
