# frozen_string_literal: true

require "queue/api"
require_relative "../apps/basic"

# JobQueue::OrderedQueue over what a real `exe/queue` process (spec/apps/ordered.rb) wrote: each shard's
# length and lag, the process that owns it until when, and the morgue a page at a time with requeue and
# delete.
RSpec.describe "JobQueue::OrderedQueue" do
  let(:redis) { TestRedis.client }

  before do
    load File.join(ServerProcess::APPS, "ordered.rb")
    [OrderedSyncWorker, OrderedFlakyWorker].each { |w| ordered_workers_made << w }
  end

  def ids_by_shard(ids, shards) = ids.group_by { |id| shard_of(id, shards) }.transform_values(&:size)

  it "lists each loaded ordered worker's queue, and refuses an unknown one by name" do
    expect(JobQueue::OrderedQueue.all.map(&:name)).to include("OrderedSyncWorker", "OrderedFlakyWorker")
    q = JobQueue::OrderedQueue.new("OrderedSyncWorker")
    expect([q.queue_name, q.shards_count, q.size, q.lag]).to eq(["OrderedSyncWorker", 3, 0, 0.0])
    expect(JobQueue::OrderedQueue.new(OrderedSyncWorker)).to eq(q)
    expect { JobQueue::OrderedQueue.new("Nope") }.to raise_error(ArgumentError, /no ordered worker named "Nope"/)
  end

  it "shows each shard's length and lag, the server that owns it and until when, and no owner once it stops" do
    ids = (1..12).map { |i| "late-#{i}" }
    OrderedSyncWorker.perform_async(ids.map { |id| {id: id, payload: id, perform_in: Time.now.to_f + 3600} })
    OrderedSyncWorker.perform_async([{id: "due", payload: "x", perform_in: Time.now.to_f - 60}])
    queue = JobQueue::OrderedQueue.new(OrderedSyncWorker)

    unowned = queue.shards
    expect(unowned.map(&:index)).to eq([0, 1, 2])
    expect(unowned.map(&:owner)).to eq([nil, nil, nil])
    expected = ids_by_shard(ids + ["due"], 3)
    expect(unowned.to_h { |s| [s.index, s.length] }).to eq((0..2).to_h { |s| [s, expected.fetch(s, 0)] })
    due_shard = unowned[shard_of("due", 3)]
    expect(due_shard.lag).to be_between(59, 90)
    expect((unowned - [due_shard]).map(&:lag)).to all(eq(0.0))
    expect(queue.lag).to be_within(1).of(due_shard.lag)

    server = start_server(app: "ordered.rb", args: ["-c", "2"])
    wait_until("the server to own every shard") { queue.shards.all?(&:owned?) }
    wait_until("the due id to run") { recorded("ordered:runs").any? { |r| r["id"] == "due" } }
    identity = registered_process_info && redis.smembers("processes").first
    owned = queue.shards
    expect(owned.map(&:owner).uniq).to eq([identity])
    expect(identity).to include(":#{server.pid}:")
    expect(owned).to all(be_alive)
    expect(owned.map(&:lease_expires_at)).to all(be_within(20).of(Time.now + 10))
    expect(owned.map { |s| s.lease_expires_at - s.last_beat }).to all(be_within(0.001).of(15))
    expect(owned.sum(&:length)).to eq(12)
    expect(owned.map(&:lag)).to all(eq(0.0))
    expect(owned.first.to_h.keys).to eq(%w[shard length lag busy owner last_beat lease_expires_at alive])

    expect(server.stop.exitstatus).to eq(0)
    expect(queue.shards.map(&:owner)).to eq([nil, nil, nil]) # released on stop
  end

  it "pages the morgue, newest first or by id, and requeues or deletes its entries" do
    OrderedFlakyWorker.perform_async(%w[d1 d2 d3].map { |id| {id: id, payload: "doomed", score: 1} })
    server = start_server(app: "ordered.rb", args: ["-c", "2"])
    morgue = JobQueue::OrderedQueue.new(OrderedFlakyWorker).morgue
    wait_until("three ids in the morgue") { morgue.size == 3 }
    expect(server.stop.exitstatus).to eq(0)

    by_id = morgue.page(0, 2, sort: :id)
    expect([by_id.entries.map(&:id), by_id.total, by_id.next_offset]).to eq([%w[d1 d2], 3, 2])
    expect(morgue.page(2, 2, sort: :id).then { |p| [p.entries.map(&:id), p.next_offset] }).to eq([%w[d3], nil])
    newest = morgue.page.entries
    expect(newest.map(&:updated_at)).to eq(newest.map(&:updated_at).sort.reverse)
    entry = by_id.entries.first
    expect([entry.error, entry.payloads, entry.updated_at]).to match(["RuntimeError: doomed d1", [["doomed", 1.0]], a_kind_of(Time)])
    expect { morgue.page(0, 2, sort: :age) }.to raise_error(ArgumentError, /unknown morgue sort :age/)

    expect(entry.requeue).to be(true)
    expect(entry.requeue).to be(false)
    expect(redis.zscore(lowkiq_key(OrderedFlakyWorker, "all_ids_lex"), "d1")).not_to be_nil
    expect(morgue.map(&:id)).to eq(%w[d2 d3])
    stub_const("JobQueue::OrderedQueue::Morgue::PAGE_SIZE", 1)
    seen = []
    morgue.each { |e| (seen << e.id) && e.id == "d2" && e.delete }
    expect(seen).to eq(%w[d2 d3]) # deleting while iterating skips nothing
    expect(morgue.map(&:id)).to eq(%w[d3])
    expect(morgue.clear).to eq(1)
    expect(morgue.size).to eq(0)
  end
end
