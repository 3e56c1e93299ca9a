# frozen_string_literal: true

require_relative "clients"
require_relative "mix_db"
require_relative "throughput_run"

module Bench
  # One measured drain of the mix's jobs (bench/apps/mix_work.rb: one SQLite row read, one Redis
  # INCR through the app's redis gem), timed and costed as ThroughputRun times blank jobs: from the
  # server's first job to its last (and, for queue, its last acknowledgement).
  class MixRun < ThroughputRun
    CLASSES = {sidekiq: "MixSidekiqJob", queue: "MixQueueJob"}.freeze
    APPS = {sidekiq: "mix_sidekiq_app.rb", queue: "mix_queue_app.rb"}.freeze

    # Pushes `count` mix jobs for `kind` with its own bulk client, in batches of 1000, their row ids
    # starting at index `from`.
    def self.push(kind, count, from: 0)
      (from...from + count).each_slice(1000) do |slice|
        Clients.push_bulk(kind, "class" => CLASSES.fetch(kind), "args" => slice.map { |i| MixDb.args(i) })
      end
    end

    # The sum of the jobs' INCRs: one per job run.
    def self.increments(redis)
      keys = redis.client.keys("mix:item-*")
      keys.empty? ? 0 : redis.client.mget(*keys).sum(&:to_i)
    end

    def initialize(kind, redis, db:, jobs:, concurrency:)
      super(kind, redis, jobs: jobs, concurrency: concurrency)
      @db = db
    end

    private

    def server_kind = @kind

    def app_file = APPS.fetch(@kind)

    def prepare
      @redis.client.flushall
      File.delete(@done_file) if File.exist?(@done_file)
      self.class.push(@kind, @jobs)
      raise "expected #{@jobs} jobs in #{QUEUE_KEY}, found #{queue_length}" unless queue_length == @jobs
    end

    def env
      super.merge("BENCH_DB" => @db, "BENCH_CONCURRENCY" => @concurrency.to_s)
    end

    # ThroughputRun's checks, and one INCR per job.
    def verify!
      super
      incrs = self.class.increments(@redis)
      raise "#{@kind}: #{incrs} Redis INCRs for #{@jobs} jobs" unless incrs == @jobs
    end
  end
end
