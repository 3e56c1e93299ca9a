# frozen_string_literal: true

require "open3"

# JobQueue::Ordered (stats, morgue, the dashboard's actions) and `queue ordered …`, against morgue and
# queue entries written in Lowkiq's raw layout.
RSpec.describe JobQueue::Ordered do
  let(:redis) { TestRedis.client }
  let(:worker) { ordered_worker("OrderedAdminWorker") }

  # A morgue entry as Lowkiq writes one.
  def bury(worker, id, payloads, at:, error: "boom")
    redis.zadd(lowkiq_key(worker, "morgue:all_ids_lex"), 0, id)
    redis.zadd(lowkiq_key(worker, "morgue:all_ids_scored_by_updated_at"), at, id)
    payloads.each { |payload, score| redis.zadd(lowkiq_key(worker, "morgue:payloads:#{id}"), score, JSON.generate(payload)) }
    redis.hset(lowkiq_key(worker, "morgue:errors"), id, error)
  end

  # A queued id that has failed `retry_count + 1` times.
  def failed(worker, id, retry_count:, perform_in:)
    worker.perform_async([{id: id, payload: "p-#{id}", score: 1, perform_in: perform_in}])
    redis.zadd(lowkiq_key(worker, "all_ids_scored_by_retry_count"), retry_count, id)
  end

  describe ".stats" do
    it "has the shape of Lowkiq's /api/v1/stats: total and by_worker, each with length, morgue_length and lag" do
      other = ordered_worker("OrderedOtherWorker")
      worker.perform_async([{id: 1, perform_in: Time.now.to_f - 30}, {id: 2}])
      other.perform_async([{id: 1, perform_in: Time.now.to_f + 3600}])
      bury(other, "x", [["p", 1]], at: 1)

      stats = described_class.stats([worker, other])

      expect(stats.keys).to eq(%w[total by_worker])
      expect(stats["by_worker"].keys).to eq(%w[OrderedAdminWorker OrderedOtherWorker])
      expect([stats["total"], *stats["by_worker"].values].map(&:keys)).to all(eq(%w[length morgue_length lag]))
      expect(stats["by_worker"]["OrderedAdminWorker"]).to include("length" => 2, "morgue_length" => 0)
      expect(stats["by_worker"]["OrderedAdminWorker"]["lag"]).to be_between(29, 60)
      expect(stats["by_worker"]["OrderedOtherWorker"]).to eq("length" => 1, "morgue_length" => 1, "lag" => 0.0)
      expect(stats["total"]).to include("length" => 3, "morgue_length" => 1, "lag" => stats["by_worker"]["OrderedAdminWorker"]["lag"])
    end

    it "covers every loaded ordered worker by default" do
      worker
      expect(described_class.stats["by_worker"]).to include("OrderedAdminWorker" => {"length" => 0, "morgue_length" => 0, "lag" => 0.0})
    end
  end

  describe "the morgue" do
    before do
      bury(worker, "b", [[{"v" => 1}, 1], [{"v" => 2}, 2]], at: 300, error: "RuntimeError: b")
      bury(worker, "a", [["only", 5]], at: 200, error: "RuntimeError: a")
      bury(worker, "c", [["c", 1]], at: 100)
    end

    it "lists entries sorted by id or by time, either way, a page at a time" do
      expect(described_class.morgue(worker).map { |e| e[:id] }).to eq(%w[a b c])
      expect(described_class.morgue(worker, descending: true).map { |e| e[:id] }).to eq(%w[c b a])
      expect(described_class.morgue(worker, sort: :updated_at).map { |e| e[:id] }).to eq(%w[c a b])
      expect(described_class.morgue("OrderedAdminWorker", sort: :time, descending: true, offset: 1, limit: 1).map { |e| e[:id] }).to eq(%w[a])
      expect(described_class.morgue(worker).find { |e| e[:id] == "b" })
        .to eq(id: "b", updated_at: 300.0, error: "RuntimeError: b", payloads: [[{"v" => 1}, 1.0], [{"v" => 2}, 2.0]])
      expect { described_class.morgue(worker, sort: :size) }.to raise_error(ArgumentError, /unknown morgue sort :size/)
    end

    it "requeues an entry, merged with the queued id: payloads union, due now, retry_count -1" do
      failed(worker, "b", retry_count: 3, perform_in: Time.now.to_f + 3600)
      before = Time.now.to_f
      expect(described_class.requeue(worker, ["b", "missing"])).to eq(1)
      state = queued_state(worker, "b")
      expect(state).to include(retry_count: -1.0, payloads: [['{"v":1}', 1.0], ['"p-b"', 1.0], ['{"v":2}', 2.0]].sort_by { |p, s| [s, p] })
      expect(state[:perform_in]).to be_within(5).of(before)
      expect(state[:shard_perform_in]).to eq(state[:perform_in])
      expect(redis.zrange(lowkiq_key(worker, "morgue:all_ids_lex"), 0, -1)).to eq(%w[a c])
      expect(redis.exists?(lowkiq_key(worker, "morgue:payloads:b"))).to be(false)
      expect(redis.hexists(lowkiq_key(worker, "morgue:errors"), "b")).to be(false)
    end

    it "deletes entries, and requeues or deletes the whole morgue" do
      expect(described_class.delete(worker, ["a"])).to eq(1)
      expect(redis.zrange(lowkiq_key(worker, "morgue:all_ids_lex"), 0, -1)).to eq(%w[b c])
      expect(redis.exists?(lowkiq_key(worker, "morgue:payloads:a"))).to be(false)
      expect(described_class.requeue_all(worker)).to eq(2)
      expect(redis.zrange(lowkiq_key(worker, "all_ids_lex"), 0, -1)).to eq(%w[b c])
      bury(worker, "d", [["d", 1]], at: 1)
      expect(described_class.delete_all(worker)).to eq(1)
      expect(redis.keys(lowkiq_key(worker, "morgue:*"))).to be_empty
    end
  end

  describe "actions on queued ids" do
    it "perform_all_jobs_now makes every queued id due now" do
      worker.perform_async([{id: 1, perform_in: Time.now.to_f + 3600}, {id: 2, perform_in: Time.now.to_f + 60}, {id: 3}])
      expect(described_class.perform_all_jobs_now).to eq(2)
      expect(zset(lowkiq_key(worker, "all_ids_scored_by_perfrom_in")).map(&:last)).to all(be <= Time.now.to_f + 1)
    end

    it "kill_all_failed_jobs moves the ids that failed to the morgue whole; fresh ones stay" do
      failed(worker, "f", retry_count: 0, perform_in: Time.now.to_f + 60)
      worker.perform_async([{id: "fresh"}])
      expect(described_class.kill_all_failed_jobs(worker)).to eq(1)
      expect(redis.zrange(lowkiq_key(worker, "all_ids_lex"), 0, -1)).to eq(%w[fresh])
      expect(zset(lowkiq_key(worker, "morgue:payloads:f"))).to eq([['"p-f"', 1.0]])
    end

    it "delete_all_failed_jobs deletes the ids that failed" do
      failed(worker, "f", retry_count: 2, perform_in: Time.now.to_f + 60)
      worker.perform_async([{id: "fresh"}])
      expect(described_class.delete_all_failed_jobs).to eq(1)
      expect(redis.zrange(lowkiq_key(worker, "all_ids_lex"), 0, -1)).to eq(%w[fresh])
      expect(redis.keys(lowkiq_key(worker, "*f"))).to be_empty
    end

    it "names an unknown worker in an ArgumentError" do
      expect { described_class.requeue("NoSuchWorker", ["1"]) }.to raise_error(ArgumentError, /no ordered worker named "NoSuchWorker"/)
    end
  end

  describe "queue ordered …" do
    exe = File.join(ServerProcess::ROOT, "exe", "queue")
    app = File.join(ServerProcess::APPS, "ordered.rb")

    def run_exe(exe, *args)
      Open3.capture3({"REDIS_URL" => TestRedis.url}, RbConfig.ruby, exe, *args)
    end

    it "prints the stats document and lists, requeues and deletes morgue entries" do
      morgued = Module.new.tap { |m| m.define_singleton_method(:queue_name) { "OrderedSyncWorker" } }
      bury(morgued, "m1", [["x", 1]], at: 10)
      bury(morgued, "m2", [["y", 1]], at: 5)

      out, err, status = run_exe(exe, "ordered", "stats", "-r", app)
      expect([status.exitstatus, err]).to eq([0, ""])
      expect(JSON.parse(out)["by_worker"]["OrderedSyncWorker"]).to eq("length" => 0, "morgue_length" => 2, "lag" => 0.0)

      out, _err, status = run_exe(exe, "ordered", "morgue", "OrderedSyncWorker", "--sort", "time", "-r", app)
      expect(status.exitstatus).to eq(0)
      expect(out.lines.map { |l| JSON.parse(l)["id"] }).to eq(%w[m2 m1])

      out, _err, status = run_exe(exe, "ordered", "requeue", "OrderedSyncWorker", "m1", "-r", app)
      expect([status.exitstatus, out]).to eq([0, "requeue: 1 id(s)\n"])
      out, _err, status = run_exe(exe, "ordered", "delete-all", "OrderedSyncWorker", "-r", app)
      expect([status.exitstatus, out]).to eq([0, "delete-all: 1 id(s)\n"])
      expect(redis.zrange("lowkiq:A:v1:OrderedSyncWorker:all_ids_lex", 0, -1)).to eq(%w[m1])

      out, _err, status = run_exe(exe, "ordered", "kill-all-failed-jobs", "-r", app)
      expect([status.exitstatus, out]).to eq([0, "kill-all-failed-jobs: 0 id(s)\n"])
    end

    it "fails with a message for a missing argument" do
      _out, err, status = run_exe(exe, "ordered", "requeue", "OrderedSyncWorker", "-r", app)
      expect(status.exitstatus).not_to eq(0)
      expect(err).to include("needs a WORKER and at least one ID")
    end
  end
end
