# frozen_string_literal: true

require "open3"
require "queue/api"
require_relative "../apps/pause"

# Queue pausing end to end (issue #23 point 4): two real `exe/queue` processes stop fetching a paused
# queue within a second while pushes go on and other queues keep running, and resume on unpause; an
# ordered queue pauses too; `queue pause|unpause|paused` from a shell.
RSpec.describe "pausing a queue" do
  let(:redis) { TestRedis.client }
  let(:held) { JobQueue::Queue.new("held") }
  # The issue's bound; each run prints what it measured.
  let(:bound) { 1.0 }

  # Loaded with the app file above: registered for this file's examples only.
  before { ordered_workers_made << PausedOrderedWorker }

  def pids_of(runs) = runs.map { |r| r["pid"] }.uniq.sort

  # Pushes a FreeWorker job stamped with its push time until both servers have run one pushed after
  # `time`: both are alive and fetching at `time`, so whatever they did not take by then they skipped.
  def both_fetching_after(servers, time)
    wait_until("both servers to run a free job pushed after #{time}") do
      FreeWorker.perform_async(Time.now.to_f)
      pids_of(recorded("pause:free").select { |r| r["pushed_at"] > time }) == servers.map(&:pid).sort
    end
  end

  it "stops two busy servers fetching it within a second, keeps its pushes, and resumes both on unpause" do
    servers = 2.times.map { start_server(app: "pause.rb", args: ["-c", "2", "-q", "held", "-q", "free"]) }
    3000.times.each_slice(500) { |slice| JobQueue::Client.push_bulk("class" => HeldWorker, "queue" => "held", "args" => slice.map { |n| [n] }) }
    wait_until("both servers to run held jobs") { pids_of(recorded("pause:held")) == servers.map(&:pid).sort }

    paused_at = Time.now.to_f
    expect(held.pause!).to be(true)
    expect(held.paused?).to be(true)
    expect(JobQueue::Queue.paused_names).to eq(["held"])
    both_fetching_after(servers, paused_at + bound)

    last = recorded("pause:held").map { |r| r["at"] }.max
    warn format("pause: the last held job started %.3f s after pause! (bound %.1f s)", last - paused_at, bound)
    expect(last - paused_at).to be <= bound
    waiting = redis.llen("queue:held")
    expect(waiting).to be > 0
    expect(recorded("pause:held").size + waiting).to eq(3000) # prefetched jobs went back, none lost
    HeldWorker.perform_async(-1)
    expect(redis.llen("queue:held")).to eq(waiting + 1) # pushes go on

    ran_before = recorded("pause:held").size
    unpaused_at = Time.now.to_f
    expect(held.unpause!).to be(true)
    expect(held.paused?).to be(false)
    wait_until("both servers to take held jobs again") do
      pids_of(recorded("pause:held").drop(ran_before)) == servers.map(&:pid).sort
    end
    first = recorded("pause:held").drop(ran_before).map { |r| r["at"] }.min
    warn format("unpause: the first held job started %.3f s after unpause!", first - unpaused_at)
    expect(first - unpaused_at).to be <= bound
    wait_until("the held queue to drain") { redis.llen("queue:held").zero? && recorded("pause:held").size == 3001 }
    expect(servers.map { |s| s.stop.exitstatus }).to eq([0, 0])
  end

  it "holds an ordered queue's ids while it is paused, and runs them once unpaused" do
    servers = 2.times.map { start_server(app: "pause.rb", args: ["-c", "2", "-q", "free"]) }
    ordered = JobQueue::OrderedQueue.new(PausedOrderedWorker)
    expect(ordered.pause!).to be(true)
    expect(JobQueue::Queue.paused_names).to eq(["PausedOrderedWorker"])
    pushed_at = Time.now.to_f
    PausedOrderedWorker.perform_async((1..10).map { |i| {id: "id-#{i}", payload: i} })
    both_fetching_after(servers, pushed_at + bound)
    expect(recorded("pause:ordered")).to eq([])
    expect(ordered.size).to eq(10)

    unpaused_at = Time.now.to_f
    expect(ordered.unpause!).to be(true)
    wait_until("every id to run") { recorded("pause:ordered").size == 10 }
    first = recorded("pause:ordered").map { |r| r["at"] }.min
    warn format("ordered unpause: the first id ran %.3f s after unpause!", first - unpaused_at)
    expect(recorded("pause:ordered").map { |r| r["id"] }).to match_array((1..10).map { |i| "id-#{i}" })
    expect(servers.map { |s| s.stop.exitstatus }).to eq([0, 0])
  end

  it "pauses, lists and unpauses from the command line" do
    exe = File.join(ServerProcess::ROOT, "exe", "queue")
    run = ->(*args) { Open3.capture3({"REDIS_URL" => TestRedis.url}, RbConfig.ruby, exe, *args) }

    expect(run.call("pause", "mail", "billing")).to match([("mail: paused\nbilling: paused\n"), "", have_attributes(exitstatus: 0)])
    expect(run.call("pause", "mail").first).to eq("mail: already paused\n")
    expect(run.call("paused").first).to eq("billing\nmail\n")
    expect(redis.smembers("jq:paused")).to match_array(%w[mail billing])
    expect(run.call("unpause", "mail").first).to eq("mail: unpaused\n")
    expect(run.call("unpause", "mail").first).to eq("mail: was not paused\n")
    expect(JobQueue::Queue.paused_names).to eq(["billing"])

    out, err, status = run.call("pause")
    expect([out, status.exitstatus]).to eq(["", 1])
    expect(err).to include("queue pause needs a queue NAME")
    expect(run.call("pause", "-h").first).to include("Usage: queue pause NAME...")
  end
end
