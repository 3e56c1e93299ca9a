# frozen_string_literal: true

RSpec.describe JobQueue::ApplicationWorker do
  # A worker class under `name` (removed after the example), its body evaluated after the include.
  def worker(name, superclass: Object, &body)
    klass = Class.new(superclass)
    stub_const(name, klass)
    klass.include(described_class) unless superclass.include?(described_class)
    klass.class_eval(&body) if body
    klass
  end

  describe "queue names" do
    it "derives the queue from the class name, without the Worker suffix" do
      expect(worker("ProcessSomethingWorker").queue).to eq("process_something")
      expect(worker("CPUIntensiveWorker").queue).to eq("cpu_intensive")
      expect(worker("PostReceive").queue).to eq("post_receive")
    end

    it "joins modules with _" do
      expect(worker("Projects::ImportWorker").queue).to eq("projects_import")
      expect(worker("Ci::BuildTraceChunkFlushWorker").queue).to eq("ci_build_trace_chunk_flush")
    end

    it "puts the queue under a namespace with queue_namespace" do
      klass = worker("SomeScheduledTaskWorker") { queue_namespace :cronjob }

      expect(klass.queue).to eq("cronjob:some_scheduled_task")
      expect(klass.queue_namespace).to eq("cronjob")
      expect(worker("PlainWorker").queue_namespace).to be_nil
    end

    it "lets an explicit sidekiq_options queue win, before or after queue_namespace" do
      expect(worker("OverrideWorker") { sidekiq_options queue: :some_queue }.queue).to eq("some_queue")
      expect(worker("LateOverrideWorker") { queue_namespace :cronjob; sidekiq_options queue: "mine" }.queue).to eq("mine")
      expect(worker("EarlyOverrideWorker") { sidekiq_options queue: "mine"; queue_namespace :cronjob }.queue).to eq("mine")
    end

    it "keeps a queue set before ApplicationWorker was included" do
      klass = Class.new
      stub_const("ConvertedWorker", klass)
      klass.include(JobQueue::Worker)
      klass.sidekiq_options queue: "legacy"
      klass.include(described_class)

      expect(klass.queue).to eq("legacy")
    end

    it "gives a subclass a queue of its own name, in the parent's namespace" do
      parent = worker("Base::SyncWorker") { queue_namespace :pipeline }
      child = worker("Base::MirrorSyncWorker", superclass: parent)

      expect(parent.queue).to eq("pipeline:base_sync")
      expect(child.queue).to eq("pipeline:base_mirror_sync")
    end

    it "enqueues jobs on the derived queue, unless the push names another" do
      klass = worker("ProcessSomethingWorker") { def perform(*) = nil }
      klass.perform_async(1)
      klass.set(queue: "elsewhere").perform_async(2)

      expect(queued_jobs("process_something").map { |j| j["args"] }).to eq([[1]])
      expect(queued_jobs("process_something").first).to include("class" => "ProcessSomethingWorker", "queue" => "process_something")
      expect(queued_jobs("elsewhere").map { |j| j["args"] }).to eq([[2]])
    end

    it "rejects a namespace that is not a plain name" do
      expect { worker("BadNamespaceWorker") { queue_namespace "has space" } }
        .to raise_error(ArgumentError, /BadNamespaceWorker: queue_namespace must be a name/)
    end

    it "keeps JobQueue::Worker's API and options" do
      klass = worker("RetryingWorker") { sidekiq_options retry: 3 }

      expect(klass.get_sidekiq_options).to include("retry" => 3, "queue" => "retrying")
      expect(klass).to respond_to(:perform_async, :perform_in, :perform_bulk, :set, :sidekiq_retry_in)
      expect(klass.default_deduplicate_strategy).to eq(:until_executing)
    end
  end

  describe "worker attributes" do
    it "has GitLab's defaults" do
      klass = worker("DefaultsWorker")

      expect(klass.get_urgency).to eq(:low)
      expect(klass.get_feature_category).to be_nil
      expect(klass.worker_has_external_dependencies?).to be(false)
      expect(klass.get_worker_resource_boundary).to eq(:unknown)
      expect(klass.get_weight).to eq(1)
      expect(klass.get_tags).to eq([])
      expect(klass.loggable_arguments).to eq([])
    end

    it "reads back every declared attribute" do
      klass = worker("DeclaredWorker") do
        urgency :throttled
        feature_category :source_code_management
        worker_has_external_dependencies!
        worker_resource_boundary :memory
        weight 3
        tags :exclude_from_kubernetes, "requires_disk_io"
        loggable_arguments 1, 3
      end

      expect(klass.worker_attributes).to eq(
        urgency: :throttled, feature_category: :source_code_management, has_external_dependencies: true,
        resource_boundary: :memory, weight: 3, tags: %i[exclude_from_kubernetes requires_disk_io]
      )
      expect(klass.loggable_arguments).to eq([1, 3])
    end

    it "is inherited, and a subclass may override it without changing its parent" do
      parent = worker("ParentWorker") { urgency :high; feature_category :importers; weight 2; loggable_arguments 0 }
      child = worker("ChildWorker", superclass: parent) { urgency :throttled }

      expect([child.get_urgency, child.get_feature_category, child.get_weight, child.loggable_arguments])
        .to eq([:throttled, :importers, 2, [0]])
      expect(parent.get_urgency).to eq(:high)
    end

    it "rejects invalid values where they are declared, naming the worker" do
      expect { worker("UrgentWorker") { urgency :critical } }.to raise_error(ArgumentError, /UrgentWorker: urgency must be one of :high, :low, :throttled, got :critical/)
      expect { worker("BoundWorker") { worker_resource_boundary :disk } }.to raise_error(ArgumentError, /worker_resource_boundary must be one of :cpu, :memory, :unknown/)
      expect { worker("HeavyWorker") { weight 0 } }.to raise_error(ArgumentError, /weight must be an Integer from 1/)
      expect { worker("FloatWorker") { weight 1.5 } }.to raise_error(ArgumentError, /weight must be an Integer/)
      expect { worker("CategoryWorker") { feature_category "" } }.to raise_error(ArgumentError, /feature_category must be a non-empty/)
      expect { worker("CategoryNilWorker") { feature_category nil } }.to raise_error(ArgumentError, /feature_category/)
      expect { worker("TagsWorker") { tags 1 } }.to raise_error(ArgumentError, /tags must be Symbols or Strings/)
      expect { worker("ArgsWorker") { loggable_arguments(-1) } }.to raise_error(ArgumentError, /loggable_arguments must be argument positions/)
    end

    it "rejects high urgency with external dependencies, in either order" do
      expect { worker("HookWorker") { urgency :high; worker_has_external_dependencies! } }
        .to raise_error(ArgumentError, /HookWorker: a worker cannot have urgency :high and external dependencies/)
      expect { worker("HookTwoWorker") { worker_has_external_dependencies!; urgency :high } }
        .to raise_error(ArgumentError, /HookTwoWorker: a worker cannot have urgency :high and external dependencies/)
    end

    it "rejects high urgency with a memory-bound worker, in either order" do
      expect { worker("MemoryWorker") { urgency :high; worker_resource_boundary :memory } }
        .to raise_error(ArgumentError, /MemoryWorker: a worker cannot have urgency :high and worker_resource_boundary :memory/)
      expect { worker("MemoryTwoWorker") { worker_resource_boundary :memory; urgency :high } }
        .to raise_error(ArgumentError, /cannot have urgency :high and worker_resource_boundary :memory/)
    end

    it "checks combinations against inherited attributes, and keeps the attribute unset when it raises" do
      parent = worker("ExternalParentWorker") { worker_has_external_dependencies! }
      child = worker("UrgentChildWorker", superclass: parent)

      expect { child.urgency :high }.to raise_error(ArgumentError, /UrgentChildWorker: .*external dependencies/)
      expect(child.get_urgency).to eq(:low)
      expect { child.worker_resource_boundary :cpu; child.urgency :low }.not_to raise_error
    end

    it "allows high urgency for CPU-bound workers without external dependencies" do
      klass = worker("FastWorker") { urgency :high; worker_resource_boundary :cpu }

      expect([klass.get_urgency, klass.get_worker_resource_boundary]).to eq(%i[high cpu])
    end
  end

  describe ".workers and .queues" do
    it "lists loaded named workers that define perform, with their weights" do
      runner = worker("RunnerWorker") { weight 4; def perform = nil }
      abstract = worker("AbstractBaseWorker")
      sub = worker("ConcreteWorker", superclass: abstract) { def perform = nil }

      expect(described_class.workers).to include(runner, sub)
      expect(described_class.workers).not_to include(abstract)
      expect(described_class.queues).to include("runner" => 4, "concrete" => 1)
    end
  end

  describe JobQueue::CronjobQueue do
    it "namespaces the queue under cronjob and turns retries off" do
      klass = worker("PruneOldEventsWorker") { include JobQueue::CronjobQueue }

      expect(klass.queue).to eq("cronjob:prune_old_events")
      expect(klass.get_sidekiq_options["retry"]).to be(false)
      expect(klass.cronjob_queue?).to be(true)
    end

    it "includes ApplicationWorker itself when included alone" do
      klass = Class.new
      stub_const("StandaloneCronWorker", klass)
      klass.include(JobQueue::CronjobQueue)

      expect(klass).to include(described_class)
      expect(klass.queue).to eq("cronjob:standalone_cron")
    end
  end

  it "can only be included in a class" do
    expect { Module.new { include JobQueue::ApplicationWorker } }.to raise_error(ArgumentError, /must be included in a class/)
  end
end
