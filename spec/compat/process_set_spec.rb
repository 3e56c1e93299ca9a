# frozen_string_literal: true

require_relative "compat_helper"

RSpec.describe "our running server, as Sidekiq 6.4.1's ProcessSet and Workers see it", :compat do
  def process_named(identity)
    Sidekiq::ProcessSet.new.find { |p| p.identity == identity }
  end

  it "shows the process and its busy job, and honours quiet! and stop! sent through Redis" do
    server = our_server(args: ["-c", "3", "-q", "default", "-q", "low,2", "-g", "compat-tag"])
    process = sidekiq_process_of(server)
    identity = process.identity
    expect(identity).to match(/\A#{Regexp.escape(Socket.gethostname)}:#{server.pid}:\h{12}\z/)
    expect(process["hostname"]).to eq(Socket.gethostname)
    expect(process["pid"]).to eq(server.pid)
    expect(process["concurrency"]).to eq(3)
    expect(process.queues).to eq(%w[default low])
    expect(process.tag).to eq("compat-tag")
    expect(process.labels).to eq([])
    expect(process["started_at"]).to be_a(Float)
    expect(process.stopping?).to be(false)
    expect(Sidekiq::ProcessSet.new.size).to eq(1)
    expect(Sidekiq::ProcessSet.new.total_concurrency).to eq(3)

    jid = CompatBlocker.perform_async("blocking", 2**70)
    wait_until("the blocking job to start") { redis.lrange("compat:started", 0, -1).include?(jid) }
    # Our server beats every 5 s, as Sidekiq does; the busy count shows from the next beat.
    process = wait_until("the heartbeat to count the busy job", timeout: 15) do
      found = process_named(identity)
      found if found && found["busy"] == 1
    end
    expect(Sidekiq::Stats.new.workers_size).to eq(1)

    works = Sidekiq::Workers.new.to_a
    expect(works.size).to eq(1)
    process_key, thread_id, work = works.first
    expect(process_key).to eq(identity)
    expect(thread_id).to be_a(String).and match(/\A[0-9a-z]+\z/)
    expect(work["queue"]).to eq("default")
    expect(work["run_at"]).to be_a(Integer)
    expect(work["payload"]).to include("class" => "CompatBlocker", "jid" => jid, "args" => ["blocking", 2**70], "queue" => "default")
    expect(Sidekiq::Workers.new.size).to eq(1)

    # quiet! (the dashboard's "Quiet"): the process takes no more jobs but keeps running.
    process.quiet!
    # One beat takes the signal from "<identity>-signals", the next one reports quiet.
    wait_until("the process to report quiet", timeout: 20) { process_named(identity)&.stopping? }
    waiting = CompatEcho.perform_async("pushed while quiet")
    redis.rpush("compat:release:#{jid}", "go")
    wait_until("the busy job to finish") { ran_jid(jid) }
    expect(server).to be_running

    # stop! (the dashboard's "Stop"): the process exits cleanly, leaving the job it never took queued.
    process_named(identity).stop!
    expect(server.wait(timeout: 20).exitstatus).to eq(0)
    expect(ran_jid(waiting)).to be_nil
    expect(Sidekiq::Queue.new("default").map(&:jid)).to eq([waiting])
    expect(Sidekiq::ProcessSet.new.size).to eq(0)
    expect(Sidekiq::Workers.new.size).to eq(0)
  end
end
