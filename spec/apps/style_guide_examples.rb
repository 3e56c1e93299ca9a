# frozen_string_literal: true

# The examples of GitLab's Sidekiq style guide, as written there (spec/api/style_guide_examples_spec.rb).
require "queue/gitlab"

class ProcessSomethingWorker
  include ApplicationWorker
end

class SomeScheduledTaskWorker
  include ApplicationWorker

  queue_namespace :cronjob

  # ...
end

class HighUrgencyWorker
  include ApplicationWorker

  urgency :high

  # ...
end

class ExternalDependencyWorker
  include ApplicationWorker

  # Declares that this worker depends on
  # third-party, external services in order
  # to complete successfully
  worker_has_external_dependencies!

  # ...
end

class CPUIntensiveWorker
  include ApplicationWorker

  # Declares that this worker will perform a lot of
  # calculations on-CPU.
  worker_resource_boundary :cpu

  # ...
end

class MyWorker
  include ApplicationWorker

  loggable_arguments 1, 3

  # object_id will be logged as it's numeric
  # string_a will be logged due to the loggable_arguments call
  # string_b will be filtered from logs
  # string_c will be logged due to the loggable_arguments call
  def perform(object_id, string_a, string_b, string_c)
  end
end

# Stand-ins for GitLab's models, so the context examples run.
StyleGuideProject = Struct.new(:id, :full_path)

class AdjournedProjectDeletionWorker
  include ApplicationWorker

  def perform(project_id); end
end

class ProjectImportScheduleWorker
  include ApplicationWorker

  def perform(project_id); end
end

class DeleteDiffFilesWorker
  include ApplicationWorker

  def perform(diff_id); end
end

# The cron worker of the "Cron workers" section, its projects given rather than queried.
class AdjournedProjectsDeletionCronWorker
  include ApplicationWorker
  include CronjobQueue

  INTERVAL = 10

  def perform(paths)
    projects = paths.each_with_index.map { |path, i| StyleGuideProject.new(i + 1, path) }
    projects.each.with_index do |project, index|
      delay = index * INTERVAL
      with_context(project: project) do
        AdjournedProjectDeletionWorker.perform_in(delay, project.id)
      end
    end
  end

  def schedule_projects_in_batch(projects)
    ProjectImportScheduleWorker.bulk_perform_async_with_contexts(
      projects,
      arguments_proc: -> (project) { project.id },
      context_proc: -> (project) { { project: project } }
    )
  end
end
