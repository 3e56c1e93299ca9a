# frozen_string_literal: true

require_relative "../apps/style_guide_examples"

# GitLab's style guide examples (spec/apps/style_guide_examples.rb) run as written.
RSpec.describe "GitLab style guide examples" do
  let(:projects) { [StyleGuideProject.new(1, "group/one"), StyleGuideProject.new(2, "other/two")] }

  it "names the queues as the guide says" do
    expect(ProcessSomethingWorker.queue).to eq("process_something")
    expect(SomeScheduledTaskWorker.queue).to eq("cronjob:some_scheduled_task")
    expect(AdjournedProjectsDeletionCronWorker.queue).to eq("cronjob:adjourned_projects_deletion_cron")
  end

  it "declares the attributes as the guide says" do
    expect(HighUrgencyWorker.get_urgency).to eq(:high)
    expect(ExternalDependencyWorker.worker_has_external_dependencies?).to be(true)
    expect(CPUIntensiveWorker.get_worker_resource_boundary).to eq(:cpu)
    expect(MyWorker.loggable_arguments).to eq([1, 3])
  end

  it "runs the cron worker's with_context example: each scheduled job has its project" do
    AdjournedProjectsDeletionCronWorker.new.perform(projects.map(&:full_path))

    jobs = sorted_set_jobs("schedule").map(&:first) + queued_jobs("adjourned_project_deletion")
    expect(jobs.map { |j| [j["args"], j["meta.project"], j["meta.root_namespace"]] })
      .to match_array([[[1], "group/one", "group"], [[2], "other/two", "other"]])
  end

  it "runs the bulk examples: each job has its own project's context" do
    AdjournedProjectsDeletionCronWorker.new.schedule_projects_in_batch(projects)
    DeleteDiffFilesWorker.bulk_perform_in_with_contexts(
      5 * 60, projects,
      arguments_proc: -> (diff) { diff.id },
      context_proc: -> (diff) { { project: diff } }
    )

    expect(queued_jobs("project_import_schedule").map { |j| [j["args"], j["meta.project"]] }).to eq([[[1], "group/one"], [[2], "other/two"]])
    expect(sorted_set_jobs("schedule").map { |j, _| [j["class"], j["args"], j["meta.project"]] })
      .to match_array([["DeleteDiffFilesWorker", [1], "group/one"], ["DeleteDiffFilesWorker", [2], "other/two"]])
  end

  it "defines ApplicationWorker and CronjobQueue at the top level with require \"queue/gitlab\"" do
    expect(ApplicationWorker).to be(JobQueue::ApplicationWorker)
    expect(CronjobQueue).to be(JobQueue::CronjobQueue)
  end
end
