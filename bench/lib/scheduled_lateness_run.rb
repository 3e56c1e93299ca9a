# frozen_string_literal: true

require_relative "clients"
require_relative "latency_run"

module Bench
  # How late scheduled jobs start. An idle server (`-c 5 -q default`) runs; once its scheduler is
  # known to poll (a canary job, due the moment it was pushed, has run), `jobs` jobs are pushed
  # SPACING apart, each due AHEAD seconds later: the push `perform_in(delay)` makes (the job with
  # "at" = now + delay, into `schedule`). Each records when it started; its lateness is that minus
  # its due time.
  class ScheduledLatenessRun
    include LatencyRun

    KEY = "latency:scheduled"
    CANARY = "latency:canary"
    AHEAD = (1.0..4.0)
    SPACING = (0.04..0.12)

    def initialize(kind, redis, jobs:, concurrency:, rng:)
      @kind = kind
      @redis = redis
      @jobs = jobs
      @concurrency = concurrency
      @rng = rng
    end

    def call
      r = @redis.client
      r.flushall
      Clients.push(@kind, "class" => PROBE, "args" => [CANARY, 0], "at" => Time.now.to_f)
      spawned = monotonic
      server = start_server([])
      begin
        server.wait_for("the scheduler's first poll", interval: 0.05, timeout: TIMEOUT) { r.llen(CANARY).positive? }
        first_poll = monotonic - spawned
        push_scheduled_jobs
        server.wait_for("#{@jobs} scheduled jobs to start", interval: 0.01, timeout: TIMEOUT) { r.llen(KEY) >= @jobs }
      ensure
        server.stop
      end

      summary(probes(KEY).map { |due, started| started - due }).merge("first_poll_s" => first_poll)
    end

    private

    def push_scheduled_jobs
      @jobs.times do
        due = Time.now.to_f + @rng.rand(AHEAD)
        Clients.push(@kind, "class" => PROBE, "args" => [KEY, due], "at" => due)
        sleep @rng.rand(SPACING) # the pushes are spread over time: that is the scenario
      end
    end
  end
end
