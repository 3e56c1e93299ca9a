# frozen_string_literal: true

# Loads both clients side by side in the benchmark process: the real Sidekiq 6.4.1 (with the redis
# gem it is installed with) and queue from this checkout.
$LOAD_PATH.unshift(File.expand_path("../../lib", __dir__))
require "logger"
require "redis"
require "sidekiq"
require "queue"

# redis 4.8 warns on every `sadd` Sidekiq's client makes, computing a caller location each time,
# which halves its push rate. Sidekiq at its best runs with the warnings silenced.
Redis.silence_deprecations = true if Redis.respond_to?(:silence_deprecations=)

module Bench
  # The job classes the benchmarks push. Their names match the classes the servers load from
  # bench/apps; in this process they exist only to be pushed.
  class SidekiqBlankJob
    include Sidekiq::Worker

    def perform; end
  end

  class QueueBlankJob
    include JobQueue::Worker

    def perform; end
  end

  # The class names as the servers know them (top level, see bench/apps).
  SIDEKIQ_CLASS = "SidekiqBlankJob"
  QUEUE_CLASS = "QueueBlankJob"

  module Clients
    module_function

    # Points both clients at the benchmark's Redis. BUSY_POLL_US sets queue's `busy_poll_us` (0: its
    # client sleeps for each reply, as Sidekiq's does).
    def configure(url)
      Sidekiq.configure_client { |c| c.redis = {url: url} }
      Sidekiq.logger.level = Logger::WARN
      JobQueue.configure do |c|
        c.redis = {url: url}
        c.busy_poll_us = Integer(ENV["BUSY_POLL_US"]) if ENV["BUSY_POLL_US"]
      end
      JobQueue.logger.level = Logger::WARN
    end

    # Gives Sidekiq's client a pool of `size` connections (its default is 5), one per pushing thread,
    # as a Puma app with RAILS_MAX_THREADS=size would.
    def pool(url, size)
      Sidekiq.configure_client { |c| c.redis = {url: url, size: size} }
    end

    # Pushes `count` blank jobs for `kind` (:sidekiq or :queue) with its own bulk client, in batches
    # of 1000 (not timed; the throughput benchmark's setup).
    def push_blank_jobs(kind, count)
      klass = {sidekiq: SIDEKIQ_CLASS, queue: QUEUE_CLASS}.fetch(kind)
      count.times.each_slice(1000) { |slice| push_bulk(kind, "class" => klass, "args" => Array.new(slice.size) { [] }) }
    end

    # One job pushed with `kind`'s client (Sidekiq::Client.push or JobQueue::Client.push): a job hash
    # in Sidekiq's format, the class given by name. With "at" it is scheduled, as `perform_in` does.
    def push(kind, item)
      client(kind).push(item)
    end

    # Jobs pushed with `kind`'s bulk client; "args" holds one argument list per job.
    def push_bulk(kind, items)
      client(kind).push_bulk(items)
    end

    def client(kind)
      {sidekiq: Sidekiq::Client, queue: JobQueue::Client}.fetch(kind)
    end
  end
end
