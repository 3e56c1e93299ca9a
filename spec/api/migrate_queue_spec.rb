# frozen_string_literal: true

require "queue/cli"
require "open3"

RSpec.describe "renaming a queue" do
  let(:redis) { TestRedis.client }
  let(:hash) { "ab" * 32 }

  before { stub_const("MigrateSpecWorker", Class.new { include JobQueue::Worker }) }

  def jids(queue) = queued_jobs(queue).map { |j| j["jid"] }

  describe "JobQueue.migrate_queue" do
    it "moves queued, scheduled and retrying jobs and deduplication keys, and reports how many" do
      queued = 3.times.map { |i| MigrateSpecWorker.set(queue: "old").perform_async(i, "✓", 2**70) }
      scheduled = MigrateSpecWorker.set(queue: "old").perform_in(3600, "later")
      untouched = MigrateSpecWorker.set(queue: "other").perform_in(3600, "other")
      retrying = {"class" => "MigrateSpecWorker", "args" => [1.0e-7], "queue" => "old", "retry_queue" => "old",
                  "jid" => "c" * 24, "retry_count" => 0, "custom" => {"z" => 1, "a" => [0.1]}}
      redis.zadd("retry", Time.now.to_f + 60, JSON.generate(retrying))
      redis.set("duplicate:old:#{hash}", "jid-1", ex: 600)

      moved = JobQueue.migrate_queue("old", :new)

      expect(moved).to eq("queued" => 3, "scheduled" => 1, "retry" => 1, "keys" => 1)
      expect(jids("new")).to eq(queued)
      expect(queued_jobs("new").map { |j| j["args"] }).to eq(3.times.map { |i| [i, "✓", 2**70] })
      expect(redis.exists?("queue:old")).to be(false)
      expect(redis.smembers("queues")).to eq(["new"])
      expect(sorted_set_jobs("schedule").to_h { |job, _| [job["jid"], job["queue"]] }).to eq(scheduled => "new", untouched => "other")
      expect(redis.zrange("retry", 0, -1)).to eq([JSON.generate(retrying.merge("queue" => "new", "retry_queue" => "new"))])
      expect(redis.get("duplicate:new:#{hash}")).to eq("jid-1")
      expect(redis.ttl("duplicate:new:#{hash}")).to be_between(590, 600)
      expect(redis.exists?("duplicate:old:#{hash}")).to be(false)
    end

    it "works under the configured namespace" do
      JobQueue.configure { |c| c.namespace = "resque:gitlab" }
      jid = MigrateSpecWorker.set(queue: "old").perform_async
      expect(JobQueue.migrate_queue("old", "new")["queued"]).to eq(1)
      expect(queued_jobs("new", namespace: "resque:gitlab:").map { |j| j["jid"] }).to eq([jid])
    end

    it "refuses to migrate a queue to itself, as an ArgumentError" do
      expect { JobQueue.migrate_queue("same", "same") }.to raise_error(ArgumentError, /to itself/)
    end
  end

  describe "queue migrate FROM TO" do
    exe = File.join(ServerProcess::ROOT, "exe", "queue")

    def run_exe(exe, *args)
      Open3.capture3({"REDIS_URL" => TestRedis.url}, RbConfig.ruby, exe, *args)
    end

    it "moves the jobs and prints the counts" do
      jid = MigrateSpecWorker.set(queue: "old").perform_async(1)
      out, err, status = run_exe(exe, "migrate", "old", "new")
      expect([status.exitstatus, err]).to eq([0, ""])
      expect(out).to eq("migrated queue old to new: 1 queued, 0 scheduled, 0 retrying job(s), 0 deduplication key(s)\n")
      expect(jids("new")).to eq([jid])
    end

    it "takes the namespace from --namespace" do
      JobQueue.configure { |c| c.namespace = "ns" }
      jid = MigrateSpecWorker.set(queue: "old").perform_async(1)
      out, _err, status = run_exe(exe, "migrate", "--namespace", "ns", "old", "new")
      expect(status.exitstatus).to eq(0)
      expect(out).to start_with("migrated queue old to new: 1 queued")
      expect(queued_jobs("new", namespace: "ns:").map { |j| j["jid"] }).to eq([jid])
    end

    it "exits 1 with the usage when a name is missing" do
      out, err, status = run_exe(exe, "migrate", "old")
      expect(status.exitstatus).to eq(1)
      expect(out).to eq("")
      expect(err).to include("Usage: queue migrate [options] FROM TO")
    end
  end
end
