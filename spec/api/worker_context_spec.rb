# frozen_string_literal: true

RSpec.describe "worker context" do
  let(:project_class) { Struct.new(:full_path) }
  let(:user_class) { Struct.new(:username, :id) }

  def worker(name, &body)
    klass = Class.new
    stub_const(name, klass)
    klass.include(JobQueue::ApplicationWorker)
    klass.class_eval { def perform(*) = nil }
    klass.class_eval(&body) if body
    klass
  end

  def meta(job)
    job.select { |key, _| key.start_with?("meta.") }
  end

  describe JobQueue::Context do
    it "is empty and frozen outside any context" do
      expect(described_class.current).to eq({})
      expect(described_class.current).to be_frozen
    end

    it "turns objects into paths and names, and derives the root namespace" do
      described_class.with(user: user_class.new("alice", 7), project: project_class.new("gitlab-org/sub/gitlab"), caller_id: :ProjectsController) do
        expect(described_class.current).to eq(
          "meta.user" => "alice", "meta.project" => "gitlab-org/sub/gitlab",
          "meta.root_namespace" => "gitlab-org", "meta.caller_id" => "ProjectsController"
        )
        expect(described_class.current).to be_frozen
      end
    end

    it "uses to_s for objects without a path or username, and takes a namespace" do
      described_class.with(user: 42, project: "group/app", namespace: project_class.new("other")) do
        expect(described_class.current).to eq("meta.user" => "42", "meta.project" => "group/app", "meta.root_namespace" => "other")
      end
    end

    it "nests, clears keys given nil, and restores the outer context, also after an error" do
      described_class.with(user: "alice", project: "group/app") do
        expect do
          described_class.with(project: nil, remote_ip: "10.0.0.1") do
            expect(described_class.current).to eq("meta.user" => "alice", "meta.remote_ip" => "10.0.0.1")
            raise "inner"
          end
        end.to raise_error("inner")
        expect(described_class.current).to eq("meta.user" => "alice", "meta.project" => "group/app", "meta.root_namespace" => "group")
      end
      expect(described_class.current).to eq({})
    end

    it "rejects unknown attributes" do
      expect { described_class.with(tenant: "x") {} }.to raise_error(ArgumentError, /unknown context attribute :tenant/)
    end
  end

  describe "enqueueing" do
    it "stores the context of with_context (class and instance method) in the job hash" do
      klass = worker("AdjournedProjectDeletionWorker")
      klass.with_context(project: project_class.new("group/app")) { klass.perform_async(1) }
      klass.new.with_context(user: "bob") { klass.perform_in(60, 2) }
      klass.perform_async(3)

      jobs = queued_jobs("adjourned_project_deletion")
      expect(meta(jobs[0])).to eq("meta.project" => "group/app", "meta.root_namespace" => "group")
      expect(meta(jobs[1])).to eq({})
      scheduled, = sorted_set_jobs("schedule").first
      expect(meta(scheduled)).to eq("meta.user" => "bob")
    end

    it "stores the context in jobs of plain workers too, and in push_bulk jobs" do
      plain = Class.new { include JobQueue::Worker }
      stub_const("PlainContextWorker", plain)
      JobQueue::Context.with(caller_id: "Api") do
        plain.perform_async(1)
        plain.perform_bulk([[2], [3]])
      end

      expect(queued_jobs.map { |j| meta(j) }).to all(eq("meta.caller_id" => "Api"))
      expect(queued_jobs.size).to eq(3)
    end

    it "adds the worker's feature category, over the caller's" do
      klass = worker("CategorisedWorker") { feature_category :code_review }
      JobQueue::Context.with(feature_category: "api", user: "ann") { klass.perform_async }

      expect(meta(queued_jobs("categorised").first)).to eq("meta.feature_category" => "code_review", "meta.user" => "ann")
    end

    it "keeps meta fields the caller set on the job itself" do
      klass = worker("ExplicitMetaWorker")
      JobQueue::Context.with(user: "ann") { klass.set("meta.user" => "carl").perform_async }

      expect(meta(queued_jobs("explicit_meta").first)).to eq("meta.user" => "carl")
    end

    it "clears the caller's context for CronjobQueue workers, keeping a caller_id" do
      cron = worker("ScheduleCleanupWorker") { include JobQueue::CronjobQueue }
      JobQueue::Context.with(user: "ann", project: "g/p") { cron.perform_async }
      JobQueue::Context.with(user: "ann", caller_id: "Admin::CleanupController") { cron.perform_async }

      JobQueue::Context.with(user: "ann") { JobQueue::Client.push("class" => "ScheduleCleanupWorker", "args" => []) }
      JobQueue::Context.with(user: "ann") { JobQueue::Client.push("class" => "NotLoadedHereWorker", "args" => [], "queue" => "cronjob:x") }

      jobs = queued_jobs("cronjob:schedule_cleanup")
      expect(jobs.map { |j| meta(j) }).to eq([{"meta.caller_id" => "Cronjob"}, {"meta.caller_id" => "Admin::CleanupController"}])
      expect(meta(queued_jobs("default").first)).to eq("meta.caller_id" => "Cronjob") # pushed by name: found, still a cron job
      expect(meta(queued_jobs("cronjob:x").first)).to eq("meta.user" => "ann")
      expect(jobs.first["retry"]).to be(false)
    end
  end

  describe "bulk helpers" do
    let(:projects) { [project_class.new("alpha/one"), project_class.new("beta/two"), project_class.new("gamma/three")] }

    it "bulk_perform_async pushes every job with the current context and returns the jids" do
      klass = worker("BulkSyncWorker")
      jids = JobQueue::Context.with(user: "ann") { klass.bulk_perform_async([[1], [2]]) }

      jobs = queued_jobs("bulk_sync")
      expect(jobs.map { |j| j["jid"] }).to eq(jids)
      expect(jobs.map { |j| [j["args"], meta(j)] }).to eq([[[1], {"meta.user" => "ann"}], [[2], {"meta.user" => "ann"}]])
    end

    it "bulk_perform_in schedules every job after the delay, and refuses a delay that is not positive" do
      klass = worker("BulkLaterWorker")
      before = Time.now.to_f
      klass.bulk_perform_in(300, [[1], [2]])

      scheduled = sorted_set_jobs("schedule")
      expect(scheduled.map { |job, _| job["args"] }).to eq([[1], [2]])
      expect(scheduled.map(&:last)).to all(be_within(5).of(before + 300))
      expect { klass.bulk_perform_in(0, [[3]]) }.to raise_error(ArgumentError, /delay must be a positive number/)
      expect { klass.bulk_perform_async([1, 2]) }.to raise_error(ArgumentError, /Array of argument Arrays/)
    end

    it "bulk_perform_in spaces batches by batch_delay, and needs both batch options" do
      klass = worker("BatchedLaterWorker")
      before = Time.now.to_f
      klass.bulk_perform_in(60, [[1], [2], [3], [4], [5]], batch_size: 2, batch_delay: 30)

      scores = sorted_set_jobs("schedule").to_h { |job, score| [job["args"].first, score - before] }
      expect(scores.keys).to eq([1, 2, 3, 4, 5])
      expect(scores.values.each_slice(2).map { |s| s.map(&:round) }).to eq([[60, 60], [90, 90], [120]])
      expect { klass.bulk_perform_in(60, [[1]], batch_size: 2) }.to raise_error(ArgumentError, /batch_size .* and batch_delay .* go together/)
      expect { klass.bulk_perform_in(60, [[1]], batch_size: 0, batch_delay: 5) }.to raise_error(ArgumentError, /go together/)
    end

    it "bulk_perform_async_with_contexts gives each job its own object's context" do
      klass = worker("ProjectImportScheduleWorker")
      JobQueue::Context.with(user: "ann") do
        klass.bulk_perform_async_with_contexts(
          projects,
          arguments_proc: ->(project) { project.full_path.length },
          context_proc: ->(project) { {project: project} }
        )
      end

      jobs = queued_jobs("project_import_schedule")
      expect(jobs.map { |j| [j["args"], meta(j)] }).to eq(
        projects.map do |p|
          [[p.full_path.length], {"meta.user" => "ann", "meta.project" => p.full_path, "meta.root_namespace" => p.full_path.split("/").first}]
        end
      )
    end

    it "bulk_perform_in_with_contexts schedules each job with its own context, and forgets them afterwards" do
      klass = worker("DeleteDiffFilesWorker")
      klass.bulk_perform_in_with_contexts(
        5 * 60, projects,
        arguments_proc: ->(project) { [project.full_path] },
        context_proc: ->(project) { {project: project} }
      )
      klass.perform_async("alpha/one")

      scheduled = sorted_set_jobs("schedule").map(&:first)
      expect(scheduled.map { |j| [j["args"].first, j["meta.project"]] }).to match_array(projects.map { |p| [p.full_path, p.full_path] })
      expect(meta(queued_jobs("delete_diff_files").first)).to eq({})
    end

    it "gives jobs with equal arguments their own object's context" do
      klass = worker("SameArgumentsWorker")
      klass.bulk_perform_async_with_contexts(projects, arguments_proc: ->(_) { [0] }, context_proc: ->(project) { {project: project} })

      expect(queued_jobs("same_arguments").map { |j| j["meta.project"] }).to eq(projects.map(&:full_path))
    end

    it "rejects a context_proc that does not return a Hash" do
      klass = worker("BadContextWorker")
      expect do
        klass.bulk_perform_async_with_contexts([1], arguments_proc: ->(x) { x }, context_proc: ->(_) { "nope" })
      end.to raise_error(ArgumentError, /context_proc must return a Hash/)
    end
  end
end
