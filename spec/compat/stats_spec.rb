# frozen_string_literal: true

require_relative "compat_helper"

RSpec.describe "Sidekiq 6.4.1's Stats, Queue and ScheduledSet over our jobs", :compat do
  it "counts what our server processed, failed, retries, buried, scheduled and left queued" do
    server = our_server(args: ["-c", "2", "-q", "default"])
    3.times { |i| CompatEcho.perform_async(i) }
    CompatDoomed.perform_async("dead")
    CompatFlaky.perform_async("retry")
    scheduled = CompatEcho.perform_in(3600, "later")
    parked = CompatEcho.set(queue: "parked").perform_bulk([["p1"], ["p2"]])

    wait_until("five jobs to be processed") { Sidekiq::Stats.new.processed >= 5 }
    wait_until("the three successes to be recorded") { ran.size >= 3 }

    stats = Sidekiq::Stats.new
    expect(stats.processed).to eq(5)
    expect(stats.failed).to eq(2)
    expect(stats.retry_size).to eq(1)
    expect(stats.dead_size).to eq(1)
    expect(stats.scheduled_size).to eq(1)
    expect(stats.enqueued).to eq(2)
    expect(stats.processes_size).to eq(1)
    expect(stats.default_queue_latency).to eq(0)
    expect(stats.queues).to eq("parked" => 2, "default" => 0)
    today = Time.now.utc.strftime("%Y-%m-%d")
    expect(Sidekiq::Stats::History.new(1).processed).to eq(today => 5)
    expect(Sidekiq::Stats::History.new(1).failed).to eq(today => 2)
    expect(ran.map { |r| r["args"] }).to contain_exactly([0], [1], [2])

    expect(Sidekiq::ScheduledSet.new.map(&:jid)).to eq([scheduled])
    expect(Sidekiq::Queue.new("parked").map(&:jid)).to eq(parked.reverse)
    expect(server.stop.exitstatus).to eq(0)
  end

  it "sizes and dates our queued jobs: Queue#size, #latency and its JobRecords" do
    jids = CompatEcho.set(queue: "parked").perform_bulk([["first", 1.5], ["second", {"n" => 2**70}]])
    later = CompatEcho.perform_async("default queue")
    queue = Sidekiq::Queue.new("parked")

    expect(queue.size).to eq(2)
    expect(Sidekiq::Queue.all.map(&:name)).to eq(%w[default parked])
    oldest = JSON.parse(redis.lindex("queue:parked", -1))
    expect(oldest["jid"]).to eq(jids.first)
    before = Time.now.to_f
    latency = queue.latency
    after = Time.now.to_f
    expect(latency).to be_a(Float).and be_between(before - oldest["enqueued_at"], after - oldest["enqueued_at"])

    records = queue.to_a
    expect(records.map(&:jid)).to eq(jids.reverse)
    expect(records.map(&:args)).to eq([["second", {"n" => 2**70}], ["first", 1.5]])
    expect(records.map(&:klass)).to all(eq("CompatEcho"))
    expect(records.map(&:queue)).to all(eq("parked"))
    expect(records.map(&:enqueued_at)).to all(be_a(Time))
    expect(queue.find_job(jids.last).args).to eq(["second", {"n" => 2**70}])
    expect(Sidekiq::Stats.new.default_queue_latency).to be > 0
    expect(Sidekiq::Queue.new("default").find_job(later)).not_to be_nil
  end

  it "shows our perform_in jobs in the ScheduledSet, and our server runs one the dashboard adds to its queue" do
    before = Time.now.to_f
    jid = CompatEcho.perform_in(3600, "scheduled", 2**70)
    after = Time.now.to_f
    at = Time.at(before + 3600)..Time.at(after + 3600)
    other = CompatEcho.set(queue: "low").perform_at(Time.at(after + 7200), "other")

    set = Sidekiq::ScheduledSet.new
    expect(set.size).to eq(2)
    entry = set.find_job(jid)
    expect(entry).to have_attributes(klass: "CompatEcho", args: ["scheduled", 2**70], queue: "default")
    expect(at).to cover(entry.at)
    expect(entry.item).not_to have_key("at")
    expect(entry["created_at"]).to be_a(Float)
    expect(set.find_job(other).queue).to eq("low")
    expect(set.map(&:jid)).to eq([other, jid]) # latest first, as Sidekiq lists a sorted set

    server = our_server
    entry.add_to_queue
    record = wait_for_runs(1, "the job added to its queue to run").first
    expect(record).to include("jid" => jid, "runner" => "queue #{JobQueue::VERSION}")
    expect_same_args(record, ["scheduled", 2**70])
    expect(Sidekiq::ScheduledSet.new.map(&:jid)).to eq([other])
    expect(server.stop.exitstatus).to eq(0)
  end
end
