# frozen_string_literal: true

require "stringio"
require_relative "../apps/style_guide_examples"

# README "GitLab-style workers", each ruby block run as written: the declarations (each `# => value`
# shown is what the line before it returns), a `perform` scheduling in context, the bulk helpers with
# contexts, and a worker's loggable arguments. The app's workers the fragments name are those of
# GitLab's style guide (spec/apps/style_guide_examples.rb); the projects and diffs are defined here.
RSpec.describe "README: GitLab-style workers" do
  # The fifth block, under "### Routing rules", is spec/api/readme_routing_spec.rb's.
  let(:blocks) { Readme.blocks("## GitLab-style workers", count: 5) }
  let(:projects) { [StyleGuideProject.new(1, "group/one"), StyleGuideProject.new(2, "other/two")] }

  def jobs_of(worker)
    (queued_jobs(worker.queue) + sorted_set_jobs("schedule").map(&:first)).select { |j| j["class"] == worker.name }
  end

  # A binding with the locals the bulk block names.
  def app_binding(projects:, diffs:) = binding

  def with_projects(jobs)
    jobs.map { |j| [j["args"], j["meta.project"], j["meta.root_namespace"]] }
  end

  it "declares the worker and reads back what it shows" do
    definition, reads = blocks[0].code.lines.partition { |line| !line.include?("# =>") }
    TOPLEVEL_BINDING.eval(definition.join, Readme::PATH, blocks[0].line)
    expect(reads.size).to eq(8)
    reads.each do |line|
      code, shown = line.split("# =>", 2)
      expect(TOPLEVEL_BINDING.eval(code)).to eq(TOPLEVEL_BINDING.eval(shown)), "README line: #{line.strip}"
    end
  ensure
    Projects.send(:remove_const, :ImportWorker) if defined?(Projects::ImportWorker)
  end

  it "runs the perform that schedules each project's job in its context" do
    list = projects
    worker = Class.new do
      include JobQueue::ApplicationWorker
      define_method(:projects) { list }
    end
    worker.class_eval(blocks[1].code, Readme::PATH, blocks[1].line)
    worker.new.perform

    expect(with_projects(jobs_of(AdjournedProjectDeletionWorker)))
      .to match_array([[[1], "group/one", "group"], [[2], "other/two", "other"]])
  end

  it "runs the bulk helpers: each job with its own project's context" do
    merge_request = Struct.new(:target_project)
    diffs = projects.map { |project| Struct.new(:id, :merge_request).new(project.id * 10, merge_request.new(project)) }
    blocks[2].run(app_binding(projects: projects, diffs: diffs))

    expect(with_projects(jobs_of(ProjectImportScheduleWorker))).to eq([[[1], "group/one", "group"], [[2], "other/two", "other"]])
    scheduled = sorted_set_jobs("schedule").select { |j, _| j["class"] == "DeleteDiffFilesWorker" }
    expect(with_projects(scheduled.map(&:first))).to match_array([[[10], "group/one", "group"], [[20], "other/two", "other"]])
    expect(scheduled.map { |j, at| (at - j["created_at"]).round }).to eq([300, 300])
  end

  it "logs a worker's numeric and listed arguments, and filters the others" do
    app = Module.new
    app.module_eval(blocks[3].code, Readme::PATH, blocks[3].line)
    log = StringIO.new
    JobQueue.configure do |c|
      c.logger = Logger.new(log)
      c.job_logs = :json
      c.log_arguments = true
    end
    job = {"class" => "MyWorker", "jid" => "0" * 24, "args" => [7, "a", "b", "c"]}
    JobQueue.config.job_log.around(app::MyWorker, job, "my") { app::MyWorker.new.perform(*job["args"]) }

    expect(log.string.lines.map { |line| JSON.parse(line)["args"] }).to eq([[7, "a", "[FILTERED]", "c"]] * 2)
  end
end
