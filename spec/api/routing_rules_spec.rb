# frozen_string_literal: true

require "queue/declared_queues"

# GitLab's routing rules (issue #22 point 4). The tables are GitLab's own examples, from
# spec/lib/gitlab/sidekiq_config/worker_matcher_spec.rb and worker_router_spec.rb and
# doc/administration/sidekiq/processing_specific_job_classes.md, run against real ApplicationWorker
# classes and a real redis-server.
RSpec.describe "Routing rules" do
  # A worker class under `name` (removed after the example), its body evaluated after the include.
  def worker(name, superclass: Object, &body)
    klass = Class.new(superclass)
    stub_const(name, klass)
    klass.include(JobQueue::ApplicationWorker) unless superclass.include?(JobQueue::ApplicationWorker)
    klass.class_eval(&body) if body
    klass
  end

  # Most tables here have no `*` rule last, which is warned about (checked below).
  before { JobQueue.config.logger = Logger.new(File::NULL) }

  def route!(rules)
    JobQueue.config.routing_rules = rules
  end

  describe "worker matching queries" do
    # GitLab's four workers of worker_matcher_spec.rb, as attribute sets (WorkerA2's resource boundary
    # `none` is kept: a query compares strings, whatever the worker declared; WorkerB has urgency
    # :high with external dependencies and memory, which WorkerAttributes would refuse to declare).
    workers = {
      "WorkerA" => {name: "pipeline_processing:worker_a", feature_category: "category_a", has_external_dependencies: false,
                    urgency: "low", resource_boundary: "cpu", tags: %w[no_disk_io git_access], queue_namespace: "pipeline_processing"},
      "WorkerA2" => {name: "pipeline_processing:worker_a2", feature_category: "category_a", has_external_dependencies: false,
                     urgency: "high", resource_boundary: "none", tags: %w[git_access], queue_namespace: "pipeline_processing"},
      "WorkerB" => {name: "authorized_project_update:worker_b", feature_category: "category_b", has_external_dependencies: true,
                    urgency: "high", resource_boundary: "memory", tags: %w[no_disk_io], queue_namespace: "authorized_project_update"},
      "WorkerC" => {name: "cronjob:worker_c", feature_category: "category_c", has_external_dependencies: false,
                    urgency: "throttled", resource_boundary: "memory", tags: [], queue_namespace: "cronjob"}
    }
    attributes = workers.to_h do |worker_name, a|
      [worker_name, {
        "worker_name" => [worker_name], "name" => [a[:name]], "feature_category" => [a[:feature_category]],
        "has_external_dependencies" => [a[:has_external_dependencies].to_s], "urgency" => [a[:urgency]],
        "resource_boundary" => [a[:resource_boundary]], "tags" => a[:tags], "queue_namespace" => [a[:queue_namespace]]
      }]
    end

    table = {
      # worker_name
      "worker_name=WorkerA" => %w[WorkerA],
      "worker_name=WorkerA2" => %w[WorkerA2],
      "worker_name=WorkerB|worker_name=WorkerD" => %w[WorkerB],
      "worker_name!=WorkerA" => %w[WorkerA2 WorkerB WorkerC],
      # feature_category
      "feature_category=category_a" => %w[WorkerA WorkerA2],
      "feature_category=category_a,category_c" => %w[WorkerA WorkerA2 WorkerC],
      "feature_category=category_a|feature_category=category_c" => %w[WorkerA WorkerA2 WorkerC],
      "feature_category!=category_a" => %w[WorkerB WorkerC],
      # has_external_dependencies: only "true" is true
      "has_external_dependencies=true" => %w[WorkerB],
      "has_external_dependencies=false" => %w[WorkerA WorkerA2 WorkerC],
      "has_external_dependencies=true,false" => %w[WorkerA WorkerA2 WorkerB WorkerC],
      "has_external_dependencies=true|has_external_dependencies=false" => %w[WorkerA WorkerA2 WorkerB WorkerC],
      "has_external_dependencies!=true" => %w[WorkerA WorkerA2 WorkerC],
      "has_external_dependencies=yes" => %w[WorkerA WorkerA2 WorkerC],
      # urgency
      "urgency=high" => %w[WorkerA2 WorkerB],
      "urgency=low" => %w[WorkerA],
      "urgency=high,low,throttled" => %w[WorkerA WorkerA2 WorkerB WorkerC],
      "urgency=low|urgency=throttled" => %w[WorkerA WorkerC],
      "urgency!=high" => %w[WorkerA WorkerC],
      # name (the generated queue name)
      "name=pipeline_processing:worker_a" => %w[WorkerA],
      "name=pipeline_processing:worker_a,authorized_project_update:worker_b" => %w[WorkerA WorkerB],
      "name=pipeline_processing:worker_a,pipeline_processing:worker_a2|name=authorized_project_update:worker_b" => %w[WorkerA WorkerA2 WorkerB],
      "name!=pipeline_processing:worker_a,pipeline_processing:worker_a2" => %w[WorkerB WorkerC],
      # resource_boundary
      "resource_boundary=memory" => %w[WorkerB WorkerC],
      "resource_boundary=memory,cpu" => %w[WorkerA WorkerB WorkerC],
      "resource_boundary=memory|resource_boundary=cpu" => %w[WorkerA WorkerB WorkerC],
      "resource_boundary!=memory,cpu" => %w[WorkerA2],
      # tags: = intersects, != is disjoint
      "tags=no_disk_io" => %w[WorkerA WorkerB],
      "tags=no_disk_io,git_access" => %w[WorkerA WorkerA2 WorkerB],
      "tags=no_disk_io|tags=git_access" => %w[WorkerA WorkerA2 WorkerB],
      "tags=no_disk_io&tags=git_access" => %w[WorkerA],
      "tags!=no_disk_io" => %w[WorkerA2 WorkerC],
      "tags!=no_disk_io,git_access" => %w[WorkerC],
      "tags=unknown_tag" => [],
      "tags!=unknown_tag" => %w[WorkerA WorkerA2 WorkerB WorkerC],
      # queue_namespace
      "queue_namespace=pipeline_processing" => %w[WorkerA WorkerA2],
      "queue_namespace=pipeline_processing,authorized_project_update" => %w[WorkerA WorkerA2 WorkerB],
      "queue_namespace=pipeline_processing|queue_namespace=authorized_project_update" => %w[WorkerA WorkerA2 WorkerB],
      "queue_namespace=cronjob" => %w[WorkerC],
      "queue_namespace!=cronjob" => %w[WorkerA WorkerA2 WorkerB],
      # precedence: | (OR) binds loosest, then & (AND), then =/!= with , (any of)
      "feature_category=category_a&urgency=high" => %w[WorkerA2],
      "feature_category=category_a&urgency=high|feature_category=category_c" => %w[WorkerA2 WorkerC],
      "urgency=high|urgency=low&tags=git_access" => %w[WorkerA WorkerA2 WorkerB],
      "urgency=low&tags=git_access|urgency=high" => %w[WorkerA WorkerA2 WorkerB],
      "tags=no_disk_io,git_access&urgency=high" => %w[WorkerA2 WorkerB],
      "urgency!=high&resource_boundary!=cpu" => %w[WorkerC],
      "urgency!=high|resource_boundary!=cpu" => %w[WorkerA WorkerA2 WorkerB WorkerC],
      # the doc's detailed example
      "resource_boundary!=cpu&urgency=high" => %w[WorkerA2 WorkerB],
      "has_external_dependencies=true|feature_category=category_c|tags=network" => %w[WorkerB WorkerC],
      # match all
      "*" => %w[WorkerA WorkerA2 WorkerB WorkerC],
      " * " => %w[WorkerA WorkerA2 WorkerB WorkerC]
    }

    table.each do |query, expected|
      it "#{query.inspect} matches #{expected.empty? ? "no worker" : expected.join(", ")}" do
        compiled = JobQueue::Routing::Query.new(query)

        expect(attributes.select { |_, a| compiled.match?(a) }.keys).to match_array(expected)
      end
    end

    # The same queries, routed: real ApplicationWorker classes with those attributes (valid ones: no
    # high urgency with external dependencies or memory), and the rule [query, "matched"].
    it "routes real workers by the same queries" do
      worker("WorkerA") do
        queue_namespace :pipeline_processing
        feature_category :category_a
        worker_resource_boundary :cpu
        tags :no_disk_io, :git_access
      end
      worker("WorkerA2") do
        queue_namespace :pipeline_processing
        feature_category :category_a
        urgency :high
        tags :git_access
      end
      worker("WorkerB") do
        queue_namespace :authorized_project_update
        feature_category :category_b
        worker_has_external_dependencies!
        worker_resource_boundary :memory
        tags :no_disk_io
      end
      worker("WorkerC") do
        include JobQueue::CronjobQueue
        feature_category :category_c
        urgency :throttled
        worker_resource_boundary :memory
      end
      workers = [WorkerA, WorkerA2, WorkerB, WorkerC]
      expect(workers.map(&:queue)).to eq(%w[pipeline_processing:worker_a pipeline_processing:worker_a2 authorized_project_update:worker_b cronjob:worker_c])

      {
        "urgency=high" => %w[WorkerA2],
        "urgency=low" => %w[WorkerA WorkerB],
        "has_external_dependencies=true" => %w[WorkerB],
        "tags=no_disk_io&tags=git_access" => %w[WorkerA],
        "tags!=no_disk_io,git_access" => %w[WorkerC],
        "resource_boundary!=memory,cpu" => %w[WorkerA2],
        "queue_namespace=cronjob" => %w[WorkerC],
        "name=pipeline_processing:worker_a,authorized_project_update:worker_b" => %w[WorkerA WorkerB],
        "worker_name=WorkerA2|feature_category=category_c" => %w[WorkerA2 WorkerC],
        "urgency=high|urgency=low&tags=git_access" => %w[WorkerA WorkerA2],
        "*" => %w[WorkerA WorkerA2 WorkerB WorkerC]
      }.each do |query, expected|
        route!([[query, "matched"]])

        expect(workers.select { |w| w.queue == "matched" }.map(&:name)).to match_array(expected), query
      end
    end
  end

  describe "routing" do
    # worker_router_spec.rb's worker ("Gitlab::Foo::BarWorker" there; GitLab drops the Gitlab:: prefix
    # from its queue name, this gem does not, so "Foo::BarWorker" has the same "foo_bar").
    let(:bar_worker) do
      worker("Foo::BarWorker") do
        feature_category :feature_a
        urgency :low
        worker_resource_boundary :cpu
        tags :expensive
      end
    end

    # GitLab's table: rules => [queue, shard].
    {
      "no rules" => [[], ["foo_bar", nil]],
      "no match: the named queue" => [
        [["feature_category=feature_b|urgency=high", "queue_a"], ["resource_boundary=memory", "queue_b"], ["tags=cheap", "queue_c"]],
        ["foo_bar", nil]
      ],
      "a match with a nil queue: the named queue" => [
        [["feature_category=feature_b|urgency=high", "queue_a"], ["resource_boundary=cpu", nil], ["tags=cheap", "queue_c"]],
        ["foo_bar", nil]
      ],
      "a match with an empty queue: the named queue" => [
        [["feature_category=feature_b|urgency=high", "queue_a"], ["resource_boundary=cpu", ""], ["tags=cheap", "queue_c"]],
        ["foo_bar", nil]
      ],
      "the first rule" => [
        [["feature_category=feature_a|urgency=high", "queue_a"], ["resource_boundary=cpu", "queue_b"], ["tags=cheap", "queue_c"]],
        ["queue_a", nil]
      ],
      "the first rule, by its second alternative" => [
        [["feature_category=feature_b|urgency=low", "queue_a"], ["resource_boundary=cpu", "queue_b"], ["tags=cheap", "queue_c"]],
        ["queue_a", nil]
      ],
      "the third rule" => [
        [["feature_category=feature_b|urgency=high", "queue_a"], ["resource_boundary=memory", "queue_b"], ["tags=expensive", "queue_c"]],
        ["queue_c", nil]
      ],
      "all match, the first wins" => [
        [["feature_category=feature_a|urgency=low", "queue_a"], ["resource_boundary=cpu", "queue_b"], ["tags=expensive", "queue_c"]],
        ["queue_a", nil]
      ],
      "the same rule three times, the first wins" => [
        [["feature_category=feature_a", "queue_a"], ["feature_category=feature_a", "queue_b"], ["feature_category=feature_a", "queue_c"]],
        ["queue_a", nil]
      ],
      "the wildcard last" => [
        [["feature_category=feature_b|urgency=high", "queue_a"], ["resource_boundary=memory", "queue_b"], ["tags=cheap", "queue_c"], ["*", "default"]],
        ["default", nil]
      ],
      "the wildcard first hides the rest" => [
        [["*", "queue_foo"], ["feature_category=feature_a|urgency=low", "queue_a"], ["resource_boundary=cpu", "queue_b"], ["tags=expensive", "queue_c"]],
        ["queue_foo", nil]
      ],
      "by generated name, with a shard" => [
        [["name=foo_bar", "queue_foo", "store_foo"], ["feature_category=feature_a|urgency=low", "queue_a"], ["resource_boundary=cpu", "queue_b"]],
        ["queue_foo", "store_foo"]
      ],
      "a nil queue with a shard: the named queue on that shard" => [
        [["resource_boundary=cpu", nil, "jobs_b"], ["*", "default"]],
        ["foo_bar", "jobs_b"]
      ]
    }.each do |description, (rules, (queue, shard))|
      it "#{description}: #{queue}#{", shard #{shard}" if shard}" do
        route!(rules)

        expect(JobQueue::Routing.route(bar_worker)).to eq([queue, shard])
        expect(bar_worker.queue).to eq(queue)
        expect(bar_worker.get_sidekiq_options["store"]).to eq(shard)
        expect(bar_worker.get_sidekiq_options.key?("store")).to be(!shard.nil?)
      end
    end

    it "routes the issue's example" do
      urgent = worker("Projects::ImportWorker") { urgency :high }
      cpu = worker("DiffWorker") { worker_resource_boundary :cpu }
      other = worker("SomeScheduledTaskWorker") { queue_namespace :cronjob }
      route!([["urgency=high", "urgent"], ["resource_boundary=cpu", "cpu_bound", "jobs_b"], ["*", nil]])

      expect([urgent, cpu, other].map { |w| JobQueue::Routing.route(w) })
        .to eq([["urgent", nil], %w[cpu_bound jobs_b], ["cronjob:some_scheduled_task", nil]])
    end

    it "gives a namespaced worker the rule's queue as it is, and its own namespaced queue for nil" do
      cron = worker("PruneEventsWorker") { include JobQueue::CronjobQueue }
      route!([["queue_namespace=cronjob&urgency=low", "cron_low"], ["*", nil]])
      expect(cron.queue).to eq("cron_low")

      route!([["queue_namespace=cronjob", nil]])
      expect(cron.queue).to eq("cronjob:prune_events")
    end

    it "matches name against the generated queue name, not a routed one" do
      klass = worker("Ci::BuildWorker")
      route!([["name=ci_build", "ci"], ["name=ci", "never"]])

      expect(klass.queue).to eq("ci")
    end

    it "leaves a worker that sets sidekiq_options queue: on it, whatever the rules" do
      explicit = worker("ExplicitWorker") do
        urgency :high
        sidekiq_options queue: "mine"
      end
      late = worker("LateExplicitWorker") do
        sidekiq_options queue: "mine_too"
        urgency :high
      end
      route!([["urgency=high", "urgent", "jobs_b"]])

      expect([explicit.queue, late.queue]).to eq(%w[mine mine_too])
      expect(explicit.get_sidekiq_options).not_to have_key("store")
      expect(JobQueue::Routing.route(explicit)).to eq(%w[urgent jobs_b])
    end

    it "routes a subclass by its own attributes and name, dropping its parent's shard" do
      parent = worker("Base::SyncWorker") { worker_resource_boundary :cpu }
      child = worker("Base::MirrorSyncWorker", superclass: parent) { worker_resource_boundary :memory }
      route!([["resource_boundary=cpu", "cpu", "jobs_b"], ["worker_name=Base::MirrorSyncWorker", nil]])

      expect([parent.queue, parent.get_sidekiq_options["store"]]).to eq(%w[cpu jobs_b])
      expect([child.queue, child.get_sidekiq_options.key?("store")]).to eq(["base_mirror_sync", false])
    end

    it "gives a subclass with its own queue no shard from its routed parent" do
      parent = worker("Base::CpuWorker") { worker_resource_boundary :cpu }
      child = worker("Base::PinnedCpuWorker", superclass: parent) { sidekiq_options queue: "pinned" }
      route!([["resource_boundary=cpu", "cpu", "jobs_b"]])

      expect(parent.get_sidekiq_options).to include("queue" => "cpu", "store" => "jobs_b")
      expect(child.get_sidekiq_options).to include("queue" => "pinned")
      expect(child.get_sidekiq_options).not_to have_key("store")
    end

    it "routes again when the rules change, and when an attribute is declared after the first look" do
      klass = worker("LateWorker")
      expect(klass.queue).to eq("late")

      route!([["urgency=high", "urgent"], ["urgency=low", "relaxed"]])
      expect(klass.queue).to eq("relaxed")

      klass.urgency :high
      expect(klass.queue).to eq("urgent")

      route!([])
      expect(klass.queue).to eq("late")
    end

    it "keeps the last good rules when new ones are refused" do
      klass = worker("KeptWorker") { urgency :high }
      route!([["urgency=high", "urgent"]])

      expect { route!([["urgency=hihg|", "x"]]) }.to raise_error(JobQueue::Routing::InvalidTerm)
      expect(klass.queue).to eq("urgent")
      expect(JobQueue.config.routing_rules).to eq([["urgency=high", "urgent"]])
    end

    it "warns, as GitLab does, when the last rule is not *" do
      log = StringIO.new
      JobQueue.config.logger = Logger.new(log)

      route!([["urgency=high", "urgent"], ["*", nil]])
      route!([])
      expect(log.string).to be_empty

      route!([["urgency=high", "urgent"]])
      expect(log.string).to include('WARN -- : routing_rules has no ["*", queue] rule last: a worker no rule matches keeps its own queue')
    end

    it "keeps the rules as given, frozen" do
      rules = [["urgency=high", :urgent], ["*", nil, "jobs_b"]]
      route!(rules)

      expect(JobQueue.config.routing_rules).to eq(rules)
      expect(JobQueue.config.routing_rules).to be_frozen
      expect(JobQueue.config.routing_rules.flatten.compact).to all(be_frozen)
      expect(JobQueue::Configuration.new.routing_rules).to eq([])
    end

    it "applies to ApplicationWorker classes only" do
      plain = Class.new { include JobQueue::Worker }
      stub_const("PlainWorker", plain)
      route!([["*", "everything"]])

      expect(plain.get_sidekiq_options["queue"]).to eq("default")
      expect { JobQueue::Routing.route(plain) }.to raise_error(ArgumentError, /ApplicationWorker classes/)
    end
  end

  describe "jobs" do
    let(:rules) { [["urgency=high", "urgent"], ["resource_boundary=cpu", "cpu_bound", "jobs_b"], ["*", nil]] }

    before do
      worker("RoutingUrgentWorker") do
        urgency :high
        def perform(*) = nil
      end
      worker("RoutingCpuWorker") do
        worker_resource_boundary :cpu
        def perform(*) = nil
      end
      worker("RoutingPlainWorker") { def perform(*) = nil }
      route!(rules)
    end

    it "go to the routed queue from perform_async, perform_in, bulk and set" do
      RoutingUrgentWorker.perform_async(1)
      RoutingUrgentWorker.perform_in(600, 2)
      RoutingUrgentWorker.bulk_perform_async([[3], [4]])
      RoutingUrgentWorker.set(queue: "elsewhere").perform_async(5)
      RoutingPlainWorker.perform_async(6)

      expect(queued_jobs("urgent").map { |j| j["args"] }).to eq([[1], [3], [4]])
      expect(queued_jobs("urgent").map { |j| j["queue"] }.uniq).to eq(["urgent"])
      expect(sorted_set_jobs("schedule").map { |job, _| job.values_at("queue", "args") }).to eq([["urgent", [2]]])
      expect(queued_jobs("elsewhere").map { |j| j["args"] }).to eq([[5]])
      expect(queued_jobs("routing_plain").map { |j| j["args"] }).to eq([[6]])
      expect(queued_jobs("urgent").first).not_to have_key("store")
    end

    it "carry the shard as \"store\" when their rule names one" do
      RoutingCpuWorker.perform_async(1)
      RoutingCpuWorker.bulk_perform_async([[2]])

      expect(queued_jobs("cpu_bound").map { |j| j.values_at("args", "store") }).to eq([[[1], "jobs_b"], [[2], "jobs_b"]])
    end

    it "follow the rules when they change between pushes" do
      RoutingUrgentWorker.perform_async(1)
      route!([["*", "everything"]])
      RoutingUrgentWorker.perform_async(2)

      expect(queued_jobs("urgent").map { |j| j["args"] }).to eq([[1]])
      expect(queued_jobs("everything").map { |j| j["args"] }).to eq([[2]])
    end

    it "are listened to: the declared queues are the routed ones" do
      config = JobQueue.config
      JobQueue::DeclaredQueues.apply(config)

      expect(config.queue_names).to include("urgent", "cpu_bound", "routing_plain", "default")
      expect(config.queue_names).not_to include("routing_urgent", "routing_cpu")
    end
  end

  describe "bad rules" do
    # rules => [error class, message]; every message names the rule's index and the rule.
    {
      "not an Array" => [{"urgency=high" => "urgent"}, JobQueue::Routing::InvalidRoutingRule,
        'routing_rules must be an Array of [query, queue] or [query, queue, shard], got {"urgency=high"=>"urgent"}'],
      "nil" => [nil, JobQueue::Routing::InvalidRoutingRule, "routing_rules must be an Array"],
      "a rule that is not an Array" => [["urgency=high"], JobQueue::Routing::InvalidRoutingRule,
        'routing_rules[0] "urgency=high": a rule is [query, queue] or [query, queue, shard]'],
      "a rule of one element" => [[["*", "default"], ["feature_category=a"]], JobQueue::Routing::InvalidRoutingRule,
        'routing_rules[1] ["feature_category=a"]: a rule is [query, queue] or [query, queue, shard]'],
      "a rule of four elements" => [[["feature_category=a", "queue_a", "shard_1", "shard_2"]], JobQueue::Routing::InvalidRoutingRule,
        'routing_rules[0] ["feature_category=a", "queue_a", "shard_1", "shard_2"]: a rule is [query, queue] or [query, queue, shard]'],
      "a query that is not a String" => [[[:urgency, "q"]], JobQueue::Routing::InvalidTerm,
        "routing_rules[0] [:urgency, \"q\"]: the query must be a String, got :urgency"],
      "an unknown attribute" => [[["*", nil], ["urgency=high&invalid_term=a", "q"]], JobQueue::Routing::UnknownPredicate,
        'routing_rules[1] ["urgency=high&invalid_term=a", "q"]: unknown attribute "invalid_term" at character 14 ' \
        "(known: worker_name, name, feature_category, has_external_dependencies, resource_boundary, tags, urgency, queue_namespace)"],
      "an empty value" => [[["feature_category=", "q"]], JobQueue::Routing::InvalidTerm,
        'routing_rules[0] ["feature_category=", "q"]: empty value in "feature_category=" at character 18'],
      "an empty value in a set" => [[["tags=a,,b", "q"]], JobQueue::Routing::InvalidTerm,
        'routing_rules[0] ["tags=a,,b", "q"]: empty value in "tags=a,,b" at character 8'],
      "a quoted value" => [[['feature_category="category_a"', "q"]], JobQueue::Routing::InvalidTerm,
        'routing_rules[0] ["feature_category=\"category_a\"", "q"]: invalid character "\"" in "feature_category=\"category_a\"" ' \
        "at character 18: values are letters, digits, _ and :, joined by ,"],
      "an unknown operator" => [[["feature_category~category_a", "q"]], JobQueue::Routing::InvalidTerm,
        'routing_rules[0] ["feature_category~category_a", "q"]: invalid term "feature_category~category_a" at character 1: ' \
        "expected attribute=value or attribute!=value"],
      "spaces around an operator" => [[["urgency=high | urgency=low", "q"]], JobQueue::Routing::InvalidTerm,
        'routing_rules[0] ["urgency=high | urgency=low", "q"]: invalid character " " in "urgency=high " at character 13'],
      "an empty clause" => [[["urgency=high||tags=a", "q"]], JobQueue::Routing::InvalidTerm,
        'routing_rules[0] ["urgency=high||tags=a", "q"]: empty term at character 14: | and & need a term on each side'],
      "a trailing operator" => [[["urgency=high&", "q"]], JobQueue::Routing::InvalidTerm,
        'routing_rules[0] ["urgency=high&", "q"]: empty term at character 14'],
      "an empty query" => [[["", "q"]], JobQueue::Routing::InvalidTerm, 'routing_rules[0] ["", "q"]: the query is empty'],
      "* with other terms" => [[["*|urgency=high", "q"]], JobQueue::Routing::InvalidTerm,
        'routing_rules[0] ["*|urgency=high", "q"]: "*" matches all workers only as the whole query, at character 1'],
      "a queue that is not a name" => [[["*", 1]], JobQueue::Routing::InvalidRoutingRule,
        'routing_rules[0] ["*", 1]: the queue must be a String, a Symbol or nil, got 1'],
      "a queue with a space" => [[["*", "two words"]], JobQueue::Routing::InvalidRoutingRule,
        'routing_rules[0] ["*", "two words"]: queue "two words" is not a queue name (no spaces or commas)'],
      "a shard that is not a String" => [[["*", "q", :jobs_b]], JobQueue::Routing::InvalidRoutingRule,
        'routing_rules[0] ["*", "q", :jobs_b]: the shard must be a non-empty String or nil, got :jobs_b'],
      "an empty shard" => [[["*", "q", ""]], JobQueue::Routing::InvalidRoutingRule,
        'routing_rules[0] ["*", "q", ""]: the shard must be a non-empty String or nil, got ""']
    }.each do |description, (rules, error, message)|
      it "raises #{error.name.split("::").last} for #{description}" do
        expect { JobQueue.configure { |c| c.routing_rules = rules } }
          .to raise_error(error) { |e| expect(e.message).to start_with(message) }
        expect(error).to be < ArgumentError
      end
    end
  end
end
