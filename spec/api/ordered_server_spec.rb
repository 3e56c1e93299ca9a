# frozen_string_literal: true

require_relative "../apps/basic"

# End to end: a real `exe/queue` process runs ordered workers (spec/apps/ordered.rb) and plain ones on
# the same processor threads.
RSpec.describe "exe/queue running ordered workers" do
  let(:redis) { TestRedis.client }
  let(:ids) { (1..40).map { |i| "order-#{i}" } }

  before do
    load File.join(ServerProcess::APPS, "ordered.rb")
    [OrderedSyncWorker, OrderedFlakyWorker].each { |w| ordered_workers_made << w }
  end

  def runs = recorded("ordered:runs")

  def versions_seen(runs) = runs.group_by { |r| r["id"] }.transform_values { |rs| rs.flat_map { |r| r["payloads"].map { |p| p["v"] } } }

  # Every version of every id, each as its own job, in a random order, in `bulks` perform_async calls.
  def push_versions(versions, bulks:)
    jobs = ids.product(versions.to_a).map { |id, v| {id: id, payload: {"v" => v}, score: v} }.shuffle
    jobs.each_slice((jobs.size / bulks.to_f).ceil) { |bulk| OrderedSyncWorker.perform_async(bulk) }
  end

  it "never runs an id twice at once across two processes, hands over its payloads merged and sorted by score, and runs plain jobs beside them" do
    push_versions(1..4, bulks: 4)
    OrderedFlakyWorker.perform_async(%w[f1 f2 f3].map { |id| {id: id, payload: id} })
    20.times { |i| EchoWorker.perform_async(i) }

    servers = 2.times.map { start_server(app: "ordered.rb", args: ["-c", "4"]) }

    # Pushed before the server started: each id's four versions merged into one job.
    wait_until("every id's first run") { versions_seen(runs).size == ids.size }
    first_runs = runs.group_by { |r| r["id"] }.transform_values(&:first)
    expect(first_runs.values.map { |r| r["payloads"] }.uniq).to eq([[1, 2, 3, 4].map { |v| {"v" => v} }])

    # Pushed while it runs, in random order: merged with whatever is still queued.
    push_versions(5..8, bulks: 8)
    wait_until("all versions to run") { versions_seen(runs).values.all? { |vs| vs.size == 8 } }
    wait_until("the plain jobs") { redis.llen("ran:echo") == 20 }
    wait_until("the flaky ids' second runs") { redis.llen("ordered:flaky") == 6 }
    expect(servers.map { |s| s.stop.exitstatus }).to eq([0, 0])

    seen = versions_seen(runs)
    expect(seen.keys).to match_array(ids)
    expect(seen.values.map(&:sort)).to all(eq((1..8).to_a))
    expect(runs.map { |r| r["payloads"].map { |p| p["v"] } }).to all(satisfy { |vs| vs == vs.sort })
    expect(recorded("ordered:overlap")).to eq([])
    expect(runs.map { |r| r["thread"] }.uniq).to all(start_with("queue-processor-"))
    expect(recorded("ran:echo").map { |r| r["args"] }).to match_array((0..19).map { |i| [i] })

    middleware = recorded("ordered:middleware")
    expect(middleware.map { |m| m["worker"] }.uniq).to match_array(%w[OrderedSyncWorker OrderedFlakyWorker])
    expect(middleware.select { |m| m["worker"] == "OrderedSyncWorker" }.map { |m| m["ids"].size }.max).to be <= 2

    flaky = recorded("ordered:flaky").group_by { |r| r["id"] }
    expect(flaky.transform_values { |rs| rs.map { |r| [r["run"], r["payloads"]] } })
      .to eq(%w[f1 f2 f3].to_h { |id| [id, [[1, [id]], [2, [id]]]] })
    expect(redis.llen("ordered:exhausted")).to eq(0)

    expect(JobQueue::Ordered.stats([OrderedSyncWorker, OrderedFlakyWorker])["total"]).to eq("length" => 0, "morgue_length" => 0, "lag" => 0.0)
    expect(redis.keys("lowkiq:A:v1:*:processing:*")).to be_empty
    expect(redis.hgetall("jq:ordered:OrderedSyncWorker:leases")).to be_empty # released on stop
  end

  it "sends what exhausts its retries to the morgue and calls retries_exhausted" do
    OrderedFlakyWorker.perform_async([{id: "d", payload: "doomed", score: 1}, {id: "d", payload: "later", score: 2}])
    server = start_server(app: "ordered.rb", args: ["-c", "2"])
    wait_until("the payload after the doomed one to run") { recorded("ordered:flaky").any? { |r| r["payloads"] == ["later"] } }
    expect(server.stop.exitstatus).to eq(0)

    # max_retry_count 1: the first failure is retried, the second sends the oldest payload to the morgue.
    expect(recorded("ordered:flaky").map { |r| r["payloads"] }).to eq([%w[doomed later], %w[doomed later], %w[later]])
    expect(recorded("ordered:exhausted")).to eq([[{"id" => "d", "payloads" => [["doomed", 1.0]], "error" => "RuntimeError: doomed d"}]])
    expect(JobQueue::Ordered.morgue(OrderedFlakyWorker)).to match([{id: "d", updated_at: a_kind_of(Float), error: "RuntimeError: doomed d", payloads: [["doomed", 1.0]]}])
  end
end
