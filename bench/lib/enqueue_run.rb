# frozen_string_literal: true

require_relative "cpu"

module Bench
  # One timed enqueue of M blank jobs: one by one from this thread (`perform_async`), one by one from
  # THREADS threads at once (`perform_async`, M / THREADS each: a Puma app's threads enqueuing), or
  # in bulk (`perform_bulk`, batches of 1000), with Sidekiq's client or queue's. The time covers the calls
  # only; the jobs are counted in Redis afterwards.
  #
  # The kind :round_trip pushes nothing: it makes M bare `PING`s, one by one, through queue's
  # engine (the connection `perform_async` uses). No push can take less than one round trip, so its
  # time is the floor of a one-by-one push on this machine.
  class EnqueueRun
    JOB_CLASSES = {sidekiq: SidekiqBlankJob, queue: QueueBlankJob, round_trip: nil}.freeze
    BATCH = 1000
    THREADS = Integer(ENV.fetch("THREADS", "16"))

    def initialize(kind, mode, redis, jobs:)
      @klass = JOB_CLASSES.fetch(kind)
      @kind = kind
      @mode = mode
      @redis = redis
      @jobs = jobs
    end

    def call
      @redis.client.flushall
      args = Array.new(@jobs) { [] }
      GC.start
      first = snapshot
      push(args)
      last = snapshot
      verify!
      result(first, last)
    end

    private

    def push(args)
      return ping if @kind == :round_trip

      case @mode
      when :one_by_one then @jobs.times { @klass.perform_async }
      when :threads then from_threads
      when :bulk then @klass.perform_bulk(args, batch_size: BATCH)
      else raise ArgumentError, "unknown mode #{@mode}"
      end
    end

    # The threads start together and each pushes its share; the time covers them all.
    def from_threads
      gate = Queue.new
      threads = Array.new(THREADS) do |i|
        share = @jobs / THREADS + (i < @jobs % THREADS ? 1 : 0)
        Thread.new do
          gate.pop
          share.times { @klass.perform_async }
        end
      end
      THREADS.times { gate << true }
      threads.each(&:join)
    end

    def ping
      raise ArgumentError, "a round trip is measured one by one, not #{@mode}" unless @mode == :one_by_one

      engine = JobQueue.config.engine
      @jobs.times { engine.ping }
    end

    def snapshot
      {
        at: Process.clock_gettime(Process::CLOCK_MONOTONIC),
        client: Cpu.self_seconds,
        redis: @redis.cpu_seconds,
        machine: Cpu.machine_seconds.first
      }
    end

    def verify!
      expected = @kind == :round_trip ? 0 : @jobs
      found = @redis.client.llen("queue:default")
      raise "#{@kind} #{@mode}: expected #{expected} jobs in queue:default, found #{found}" unless found == expected
    end

    def result(first, last)
      seconds = last[:at] - first[:at]
      delta = ->(key) { last[key] - first[key] }
      others = delta.(:machine) - delta.(:client) - delta.(:redis)
      {
        "client" => @kind.to_s,
        "mode" => @mode.to_s,
        "jobs" => @jobs,
        "seconds" => seconds,
        "jobs_per_s" => @jobs / seconds,
        "client_cpu_us_per_job" => delta.(:client) * 1e6 / @jobs,
        "redis_cpu_us_per_job" => delta.(:redis) * 1e6 / @jobs,
        "other_processes_cores" => [others, 0].max / seconds
      }
    end
  end
end
