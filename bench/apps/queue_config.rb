# frozen_string_literal: true

# What every app a benchmark runs under our server shares: Redis from REDIS_URL, and logging at WARN
# as for Sidekiq (BENCH_LOG_LEVEL=info turns the per-job lines on); Sidekiq's Metrics page data at
# the default 7 (BENCH_SIDEKIQ_METRICS=false turns it off). BENCH_JOB_THREAD_POLICY=off leaves the job
# threads under the kernel's default policy (config.job_thread_policy = nil), for an A/B of SCHED_BATCH;
# BENCH_MAX_BATCH=n sets config.max_batch, for an A/B of the fetch's cap.
require "logger"
require "queue"

JobQueue.configure do |c|
  c.redis = {url: ENV.fetch("REDIS_URL")}
  c.logger.level = ENV.fetch("BENCH_LOG_LEVEL", "warn")
  c.sidekiq_metrics = false if ENV["BENCH_SIDEKIQ_METRICS"] == "false"
  c.job_thread_policy = nil if ENV["BENCH_JOB_THREAD_POLICY"] == "off"
  c.max_batch = Integer(ENV["BENCH_MAX_BATCH"]) if ENV["BENCH_MAX_BATCH"]
end
