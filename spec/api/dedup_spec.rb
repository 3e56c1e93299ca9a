# frozen_string_literal: true

require "digest"
require "queue/cli"
require_relative "../apps/api_dedup"

RSpec.describe "GitLab-style deduplication" do
  let(:redis) { TestRedis.client }

  def key_for(worker, args, queue: "default", namespace: "")
    "#{namespace}duplicate:#{queue}:#{Digest::SHA256.hexdigest("#{worker.name}:#{JSON.generate(args)}")}"
  end

  def started
    recorded("dedup:started")
  end

  describe "the DSL" do
    def worker(&block)
      Class.new do
        include JobQueue::Worker
        def self.name = "DslWorker"
        class_eval(&block) if block
      end
    end

    it "defaults to :none for plain workers and to :until_executing once idempotent!" do
      expect(worker.get_deduplicate_strategy).to eq(:none)
      expect(worker.idempotent?).to be(false)
      expect(worker { idempotent! }.get_deduplicate_strategy).to eq(:until_executing)
      expect(worker { idempotent! }.idempotent?).to be(true)
    end

    it "reads back what was declared, and subclasses inherit it" do
      base = worker { deduplicate :until_executed, ttl: 300, if_deduplicated: :reschedule_once, including_scheduled: true }
      expect(base.get_deduplicate_strategy).to eq(:until_executed)
      expect(base.get_deduplication_options).to eq(ttl: 300, if_deduplicated: :reschedule_once, including_scheduled: true)
      child = Class.new(base) { idempotent! }
      expect(child.get_deduplicate_strategy).to eq(:until_executed)
      expect(child.get_deduplication_options[:ttl]).to eq(300)
      expect(child.idempotent?).to be(true)
      expect(base.idempotent?).to be(false)
    end

    it "takes a ttl that answers to_i, and a base class may change the default strategy" do
      duration = Struct.new(:seconds) { def to_i = seconds }
      expect(worker { deduplicate :until_executing, ttl: duration.new(300) }.get_deduplication_options).to eq(ttl: 300)
      application = worker { def self.default_deduplicate_strategy = :until_executing }
      expect(Class.new(application).get_deduplicate_strategy).to eq(:until_executing)
    end

    it "refuses unknown strategies, options and values at once, naming them" do
      expect { worker { deduplicate :until_done } }.to raise_error(ArgumentError, /unknown deduplication strategy :until_done/)
      expect { worker { deduplicate :until_executing, tll: 5 } }.to raise_error(ArgumentError, /unknown deduplication option\(s\) :tll/)
      expect { worker { deduplicate :until_executing, ttl: "soon" } }.to raise_error(ArgumentError, /ttl must be a positive number of seconds, got "soon"/)
      expect { worker { deduplicate :until_executing, including_scheduled: "yes" } }.to raise_error(ArgumentError, /including_scheduled must be true or false/)
      expect { worker { deduplicate :until_executed, if_deduplicated: :retry } }.to raise_error(ArgumentError, /unknown if_deduplicated :retry/)
      expect { worker { deduplicate :until_executing, if_deduplicated: :reschedule_once } }.to raise_error(ArgumentError, /needs the :until_executed strategy, not :until_executing/)
    end
  end

  describe "pushing" do
    it "drops an idempotent worker's duplicate: perform_async returns nil, one job is queued" do
      jid = DedupExecutingWorker.perform_async("a")
      expect(DedupExecutingWorker.perform_async("a")).to be_nil
      expect(DedupExecutingWorker.perform_async("b")).to be_a(String)
      key = key_for(DedupExecutingWorker, ["a"])
      expect(redis.get(key)).to eq(jid)
      expect(redis.ttl(key)).to be_between(6 * 3600 - 5, 6 * 3600)
      jobs = queued_jobs
      expect(jobs.map { |j| j["args"] }).to eq([["a"], ["b"]])
      expect(jobs.first).to include("jid" => jid, "idempotency_key" => key)
      expect(jobs.first).not_to have_key("duplicate-of")
    end

    it "marks a non-idempotent worker's duplicate and pushes it" do
      first = DedupMarkedWorker.perform_async(1)
      second = DedupMarkedWorker.perform_async(1)
      expect(second).to be_a(String)
      expect(queued_jobs.map { |j| j["duplicate-of"] }).to eq([nil, first])
    end

    it "leaves plain workers alone" do
      DedupPlainWorker.perform_async(1)
      DedupPlainWorker.perform_async(1)
      expect(queued_jobs.size).to eq(2)
      expect(queued_jobs.first).not_to have_key("idempotency_key")
      expect(redis.keys("duplicate:*")).to be_empty
    end

    it "hashes idempotency_arguments(args) when the worker narrows them" do
      DedupNarrowWorker.perform_async(7, "noise")
      expect(DedupNarrowWorker.perform_async(7, "other noise")).to be_nil
      expect(redis.exists?(key_for(DedupNarrowWorker, [7]))).to be(true)
    end

    it "deduplicates bulk pushes in the same call, returning only the jids pushed" do
      jids = DedupExecutingWorker.perform_bulk([["x"], ["x"], ["y"]])
      expect(jids.size).to eq(2)
      expect(queued_jobs.map { |j| j["jid"] }).to eq(jids)
    end

    it "does not deduplicate scheduled jobs unless including_scheduled, which lives delay + ttl" do
      DedupExecutingWorker.perform_in(100, "s")
      DedupExecutingWorker.perform_in(100, "s")
      expect(redis.zcard("schedule")).to eq(2)
      expect(redis.keys("duplicate:*")).to be_empty

      DedupScheduledWorker.perform_in(100, "s")
      expect(DedupScheduledWorker.perform_in(100, "s")).to be_nil
      expect(redis.zcard("schedule")).to eq(3)
      expect(redis.ttl(key_for(DedupScheduledWorker, ["s"]))).to be_between(695, 701)
    end

    it "lets the key expire after its ttl" do
      DedupShortWorker.perform_async(1)
      expect(DedupShortWorker.perform_async(1)).to be_nil
      wait_until("the key to expire", timeout: 5) { !redis.exists?(key_for(DedupShortWorker, [1])) }
      expect(DedupShortWorker.perform_async(1)).to be_a(String)
      expect(queued_jobs.size).to eq(2)
    end

    it "stops dropping for a queue whose flag is set in Redis (queue feature enable)" do
      out = StringIO.new
      cli = JobQueue::CLI.new(out: out)
      expect(cli.run(%w[feature enable disable_default_deduplication])).to eq(0)
      first = DedupExecutingWorker.perform_async(1)
      expect(DedupExecutingWorker.perform_async(1)).to be_a(String)
      expect(queued_jobs.last["duplicate-of"]).to eq(first)
      cli.run(%w[feature list])
      expect(out.string).to include("disable_default_deduplication=1")
      expect(JobQueue.config.feature_flag.call("disable_default_deduplication")).to be(true)
      expect(JobQueue.config.feature_flag.call("disable_other_deduplication")).to be(false)
      cli.run(%w[feature disable disable_default_deduplication])
      expect(DedupExecutingWorker.perform_async(1)).to be_nil
    end

    it "asks a custom feature_flag callable instead" do
      asked = []
      JobQueue.config.feature_flag = ->(name) { asked << name; true }
      DedupExecutingWorker.perform_async(1)
      expect(DedupExecutingWorker.perform_async(1)).to be_a(String)
      expect(asked).to eq(%w[disable_default_deduplication] * 2)
      expect { JobQueue.config.feature_flag = :nope }.to raise_error(ArgumentError, /respond to call/)
    end

    it "writes GitLab's keys, TTLs and fields under the resque:gitlab: namespace (WIRE.md section 2)" do
      JobQueue.config.namespace = "resque:gitlab:"
      jid = DedupExecutingWorker.perform_async(42)
      marked = DedupMarkedWorker.perform_async(42)
      DedupMarkedWorker.perform_async(42)
      key = key_for(DedupExecutingWorker, [42], namespace: "resque:gitlab:")
      expect(key).to eq("resque:gitlab:duplicate:default:#{Digest::SHA256.hexdigest("DedupExecutingWorker:[42]")}")
      expect(redis.get(key)).to eq(jid)
      expect(redis.ttl(key)).to be_between(21_595, 21_600)
      raw = redis.lrange("resque:gitlab:queue:default", 0, -1).reverse.map { |r| JSON.parse(r) }
      expect(raw[0]["idempotency_key"]).to eq(key)
      expect(raw[1]["idempotency_key"]).to eq(key_for(DedupMarkedWorker, [42], namespace: "resque:gitlab:"))
      expect(raw[2]["duplicate-of"]).to eq(marked)
      expect(redis.smembers("resque:gitlab:queues")).to eq(["default"])
      expect(redis.keys("duplicate:*")).to be_empty
    end
  end

  # Releasing keys, where Processor#process runs the job (a server middleware records it) and where
  # the engine runs it itself (no middleware: Fetcher#run releases the key).
  shared_examples "releasing keys" do |in_engine|
    def server(env = {})
      start_server(app: "api_dedup.rb", args: ["-c", "2"], env: server_env.merge(env))
    end

    after do
      expect(started.map { |run| run["via_process"] }.uniq).to eq([false]) if in_engine
    end

    it "until_executing: releases the key just before the job starts" do
      DedupExecutingWorker.perform_async("gated-1")
      expect(DedupExecutingWorker.perform_async("gated-1")).to be_nil
      server
      wait_until("the job to start") { started.size == 1 }
      wait_until("the key to be released") { !redis.exists?(key_for(DedupExecutingWorker, ["gated-1"])) }
      expect(DedupExecutingWorker.perform_async("gated-1")).to be_a(String)
      redis.rpush("dedup:gate:gated-1", %w[go go])
      wait_until("the second run") { started.size == 2 }
    end

    it "until_executed with reschedule_once: runs once more after a duplicate was dropped while it ran" do
      first = DedupExecutedWorker.perform_async("gated-2")
      server
      wait_until("the job to start") { started.size == 1 }
      key = key_for(DedupExecutedWorker, ["gated-2"])
      expect(redis.get(key)).to eq(first)
      expect(DedupExecutedWorker.perform_async("gated-2")).to be_nil
      expect(DedupExecutedWorker.perform_async("gated-2")).to be_nil
      redis.rpush("dedup:gate:gated-2", "go")
      wait_until("the rescheduled run") { started.size == 2 }
      again = started.last
      expect(again).to include("class" => "DedupExecutedWorker", "args" => ["gated-2"])
      expect(again["rescheduled_once"]).to be(true) unless in_engine # a field only the job Hash shows
      expect(again["jid"]).not_to eq(first)
      redis.rpush("dedup:gate:gated-2", "go")
      wait_until("the key to be released") { !redis.exists?(key) }
      expect(started.size).to eq(2)
    end

    it "until_executed: releases the key when perform raises" do
      DedupExecutedWorker.perform_async("fail")
      server
      wait_until("the failure to be filed") { redis.zcard("retry") == 1 }
      expect(redis.exists?(key_for(DedupExecutedWorker, ["fail"]))).to be(false)
      expect(started.size).to eq(1)
    end
  end

  describe "in a server" do
    let(:server_env) { {} }

    include_examples "releasing keys", false

    it "hands the newest wal_locations of dropped duplicates to the job that runs" do
      DedupExecutingWorker.set("wal_locations" => {"main" => "0/A0", "ci" => "0/5"}).perform_async("w")
      expect(DedupExecutingWorker.set("wal_locations" => {"main" => "0/B0", "ci" => "0/4"}).perform_async("w")).to be_nil
      expect(DedupExecutingWorker.set("wal_locations" => {"main" => "0/9F", "geo" => "12"}).perform_async("w")).to be_nil
      server
      wait_until("the job to run") { started.size == 1 }
      expect(started.first["wal_locations"]).to eq("main" => "0/B0", "ci" => "0/5", "geo" => "12")
      expect(redis.keys("duplicate:*")).to be_empty
    end

    it "keeps the wire format under a namespace end to end" do
      JobQueue.config.namespace = "resque:gitlab:"
      DedupExecutedWorker.perform_async("ns")
      server("DEDUP_NAMESPACE" => "resque:gitlab:")
      wait_until("the job to run") { started.size == 1 }
      wait_until("the key to be released") { redis.keys("resque:gitlab:duplicate:*").empty? }
      expect(started.first["idempotency_key"]).to eq(key_for(DedupExecutedWorker, ["ns"], namespace: "resque:gitlab:"))
    end
  end

  describe "in a server whose engine runs the jobs (no server middleware)" do
    let(:server_env) { {"DEDUP_IN_ENGINE" => "1"} }

    include_examples "releasing keys", true
  end
end
