# frozen_string_literal: true

# App for spec/api/server_middleware_spec.rb: server middleware that record around `perform`, in
# Redis list "api:events".
require_relative "basic"

module ApiServerMiddleware
  def self.record(event)
    Record.redis.rpush("api:events", JSON.generate(event))
  end

  # Records before and after the rest of the chain, with what it was called with.
  class Around
    def initialize(label)
      @label = label
    end

    def call(worker, job, queue)
      ApiServerMiddleware.record(
        "event" => "before", "label" => @label, "worker" => worker.class.name, "worker_jid" => worker.jid,
        "jid" => job["jid"], "queue" => queue, "tenant" => job["tenant"]
      )
      yield
      ApiServerMiddleware.record("event" => "after", "label" => @label, "jid" => job["jid"])
    end
  end

  # Two entries of the chain (a chain holds a class once).
  class Outer < Around; end

  class Inner < Around; end

  # Skips `perform` for jobs whose first argument is "skip"; upcases the first argument otherwise.
  class Gate
    def call(_worker, job, _queue)
      return if job["args"].first == "skip"

      job["args"][0] = job["args"][0].upcase
      yield
    end
  end

  # Fails jobs whose first argument is "raise" before they run.
  class Raiser
    def call(_worker, job, _queue)
      raise ArgumentError, "refused by middleware" if job["args"].first == "raise"

      yield
    end
  end
end

JobQueue.configure_server do |config|
  config.server_middleware do |chain|
    chain.add ApiServerMiddleware::Outer, "outer"
    chain.add ApiServerMiddleware::Raiser
    chain.add ApiServerMiddleware::Inner, "inner"
    chain.add ApiServerMiddleware::Gate
  end
end

class ApiMiddlewareWorker
  include JobQueue::Worker
  sidekiq_options "tenant" => "acme", retry: 1

  def perform(word)
    ApiServerMiddleware.record("event" => "perform", "jid" => jid, "arg" => word)
  end
end
