# frozen_string_literal: true

module JobQueue
  # GitLab's routing rules: `config.routing_rules` sends ApplicationWorkers to queues (and records a
  # shard for them) by their attributes, with GitLab's worker matching queries (routing/query.rb,
  # routing/router.rb).
  #
  #   JobQueue.configure do |c|
  #     c.routing_rules = [
  #       ["urgency=high", "urgent"],
  #       ["resource_boundary=cpu", "cpu_bound", "jobs_b"],
  #       ["*", nil]                                        # nil: the worker's own queue
  #     ]
  #   end
  #
  #   JobQueue::Routing.route(Projects::ImportWorker)      # => ["urgent", nil]
  module Routing
    # Every bad rule raises one of these (ArgumentErrors), as GitLab's WorkerRouter and WorkerMatcher do.
    Error = Class.new(ArgumentError)
    InvalidRoutingRule = Class.new(Error)
    InvalidTerm = Class.new(Error)
    UnknownPredicate = Class.new(Error)

    module_function

    # [queue, shard] the configured rules give an ApplicationWorker class: the first matching rule's
    # queue (the worker's own generated queue when that is nil) and shard (nil when it names none), or
    # the worker's own queue and nil when no rule matches. A `sidekiq_options queue:` of the class is
    # not consulted here; it wins over the rules in the worker's own options (ApplicationWorker).
    def route(worker, router = JobQueue.config.router)
      unless worker.is_a?(Class) && worker.respond_to?(:generated_queue_name) && worker.name
        raise ArgumentError, "routing rules apply to named JobQueue::ApplicationWorker classes, got #{worker.inspect}"
      end

      namespace = worker.get_sidekiq_options["queue_namespace"]
      route_for(worker, worker.generated_queue_name, namespace, router)
    end

    # @api private: route for a worker whose generated queue and namespace are known (what
    # ApplicationWorker#get_sidekiq_options has at hand).
    def route_for(worker, own_queue, namespace, router = JobQueue.config.router)
      return [own_queue, nil] if router.empty?

      router.route(attributes(worker, own_queue, namespace), own_queue)
    end

    # The attributes a query matches, each as an Array of Strings (a worker has any number of tags and
    # at most one of the others): GitLab's worker metadata.
    def attributes(worker, own_queue, namespace)
      {
        "worker_name" => [worker.name],
        "name" => [own_queue],
        "feature_category" => Array(worker.get_feature_category&.to_s),
        "has_external_dependencies" => [worker.worker_has_external_dependencies?.to_s],
        "resource_boundary" => [worker.get_worker_resource_boundary.to_s],
        "tags" => worker.get_tags.map(&:to_s),
        "urgency" => [worker.get_urgency.to_s],
        "queue_namespace" => Array(namespace&.to_s)
      }
    end
  end
end

require_relative "routing/query"
require_relative "routing/router"
