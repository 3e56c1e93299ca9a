# frozen_string_literal: true

# App for spec/api/routing_rules_server_spec.rb: ApplicationWorkers under GitLab's routing rules, set
# in the app as GitLab sets them in gitlab.yml, so clients and servers route alike.
require_relative "basic"

module RoutedWorkers
  RULES = [
    ["urgency=high", "urgent"],
    ["resource_boundary=cpu", "cpu_bound", "jobs_b"],
    ["*", nil]
  ].freeze

  def self.record(worker, args)
    Record.redis.rpush("ran:routed", JSON.generate("class" => worker.class.name, "queue" => worker.class.queue, "args" => args))
  end
end

JobQueue.configure { |config| config.routing_rules = RoutedWorkers::RULES }

class RoutedUrgentWorker
  include JobQueue::ApplicationWorker
  urgency :high

  def perform(*args) = RoutedWorkers.record(self, args)
end

class RoutedCpuWorker
  include JobQueue::ApplicationWorker
  worker_resource_boundary :cpu

  def perform(*args) = RoutedWorkers.record(self, args)
end

class RoutedPlainWorker
  include JobQueue::ApplicationWorker
  weight 2

  def perform(*args) = RoutedWorkers.record(self, args)
end
