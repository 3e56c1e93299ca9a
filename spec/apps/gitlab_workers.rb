# frozen_string_literal: true

# App for the GitLab-style worker specs (spec/api/application_worker_server_spec.rb, job_logs_spec.rb):
# ApplicationWorkers that record, in Redis, the context they ran with.
require_relative "basic"

JobQueue.configure_server do |config|
  config.job_logs = :json if ENV["QUEUE_JOB_LOGS"] == "json"
  config.log_arguments = true if ENV["QUEUE_LOG_ARGUMENTS"] == "true"
end

module GitlabWorkers
  def self.record(key, value)
    Record.redis.rpush(key, JSON.generate(value))
  end
end

# Records its context, then enqueues the next step: step 1 as it is (its context carries over), step 2
# inside `with_context(project: ...)` (the project changes, the rest carries over).
class ContextChainWorker
  include JobQueue::ApplicationWorker
  feature_category :team_planning

  def perform(step)
    GitlabWorkers.record("ran:context", "step" => step, "jid" => jid, "context" => JobQueue::Context.current,
      "frozen" => JobQueue::Context.current.frozen?)
    case step
    when 1 then self.class.perform_async(2)
    when 2 then with_context(project: "other-group/tool") { self.class.perform_async(3) }
    end
  end
end

# Recurring work: enqueues jobs of its own for each project it is given, each with its own context.
class NightlyCleanupWorker
  include JobQueue::ApplicationWorker
  include JobQueue::CronjobQueue
  feature_category :cleanup

  def perform
    GitlabWorkers.record("ran:cron", "context" => JobQueue::Context.current)
    ContextChainWorker.bulk_perform_async_with_contexts(
      %w[alpha/one beta/two],
      arguments_proc: ->(_path) { 3 },
      context_proc: ->(path) { {project: path} }
    )
  end
end

# The style guide's example: positions 1 and 3 may be logged.
class LoggedArgumentsWorker
  include JobQueue::ApplicationWorker
  loggable_arguments 1, 3

  def perform(object_id, string_a, string_b, string_c); end
end

class FailingWorker
  include JobQueue::ApplicationWorker
  sidekiq_options retry: false

  def perform(reason)
    raise ArgumentError, reason
  end
end

# Spins on the CPU for the given number of seconds.
class BusyWorker
  include JobQueue::ApplicationWorker
  worker_resource_boundary :cpu
  weight 3

  def perform(seconds)
    finish = Process.clock_gettime(Process::CLOCK_MONOTONIC) + seconds
    nil while Process.clock_gettime(Process::CLOCK_MONOTONIC) < finish
  end
end

class ReportCronWorker
  include JobQueue::ApplicationWorker
  include JobQueue::CronjobQueue

  def perform
    GitlabWorkers.record("ran:report", "queue" => self.class.queue)
  end
end
