# frozen_string_literal: true

require_relative "support"
require_relative "../apps/reliability_block"

# TERM with jobs running: the server stops taking work, waits up to its shutdown timeout (-t) for the
# running jobs, puts back whatever did not finish, and exits 0. The jobs block until the spec sets the
# `release` key, so the spec decides whether they finish in time.
RSpec.describe "graceful stop (TERM) with jobs running" do
  include_context "with server processes"

  def start_blocking_jobs(count, timeout:)
    jids = Array.new(count) { |i| ReliabilityBlockingWorker.perform_async("job #{i}") }
    pushed = redis.lrange("queue:default", 0, -1)
    server = start_server("reliability_block.rb", "-c", "4", "-t", timeout.to_s)
    wait_until("4 jobs to be running") { redis.llen("started") == 4 }
    [server, jids, pushed]
  end

  it "lets running jobs finish when they end within the timeout, and requeues nothing" do
    server, jids, = start_blocking_jobs(4, timeout: 5)
    identity = identity_of(server)
    expect(held_jobs(identity)).to eq(4)

    server.signal("TERM")
    wait_until("the server to begin its shutdown") { server.output.include?("shutting down") }
    redis.set("release", "1")
    status = server.wait

    expect(status.exitstatus).to eq(0)
    expect(list_of("finished").map { |j| j["jid"] }).to match_array(jids)
    expect(list_of("started").map { |j| j["jid"] }).to match_array(jids) # each ran once
    expect(redis.llen("queue:default")).to eq(0)
    expect(working_lists).to be_empty
    expect(redis.smembers("processes")).to be_empty
    expect(redis.exists?(identity)).to be(false)
  end

  # Quick jobs first, then `count` blocking ones, all queued before the server starts: each thread
  # times the quick ones, so it fetches in batches, and the first batch to reach the blocking jobs takes
  # several of them (a fair share of a queue that still holds them all).
  def start_warmed_server_with_blocking_jobs(count, timeout:)
    warm_ups = 40
    warm_ups.times { ReliabilityBlockingWorker.perform_async("warm-up", warm_ups) }
    jids = Array.new(count) { |i| ReliabilityBlockingWorker.perform_async("job #{i}") }
    pushed = redis.lrange("queue:default", 0, -1).reject { |raw| JSON.parse(raw)["args"].first == "warm-up" }
    server = start_server("reliability_block.rb", "-c", "4", "-t", timeout.to_s)
    wait_until("the quick jobs to run and 4 blocking ones to start") do
      redis.llen("warmed") == 1 && redis.llen("started") == 4
    end
    [server, jids, pushed]
  end

  %w[TERM INT].each do |signal|
    it "puts back the running and the prefetched jobs when the timeout runs out, and exits 0 (#{signal})" do
      server, jids, pushed = start_warmed_server_with_blocking_jobs(12, timeout: 1)
      identity = identity_of(server)
      # The threads took batches: besides the 4 running jobs, some wait in memory (prefetched).
      wait_until("jobs to be prefetched beyond the running ones") { held_jobs(identity) > 4 }
      running = list_of("started").map { |j| j["jid"] }

      status = server.stop(signal)

      expect(status.exitstatus).to eq(0)
      expect(list_of("finished")).to be_empty
      # Every job, the 4 cut short included, is back in the queue exactly once, byte for byte as pushed.
      expect(redis.lrange("queue:default", 0, -1)).to match_array(pushed)
      expect(list_of("queue:default").map { |j| j["jid"] }).to match_array(jids)
      expect(jids).to include(*running)
      # No prefetched job was started on the way out.
      expect(list_of("started").map { |j| j["jid"] }).to match_array(running)
      # Nothing held anywhere, and the process has left `processes`.
      expect(working_lists).to be_empty
      expect(redis.exists?("jq:working:#{identity}")).to be(false)
      expect(redis.smembers("processes")).not_to include(identity)
      expect(redis.exists?(identity)).to be(false)
      expect(redis.zscore("jq:alive", identity)).to be_nil
    end
  end

  it "runs the requeued jobs once a new server starts" do
    server, jids, = start_blocking_jobs(6, timeout: 1)
    expect(server.stop("TERM").exitstatus).to eq(0)
    expect(list_of("queue:default").map { |j| j["jid"] }).to match_array(jids)

    redis.set("release", "1")
    start_server("reliability_block.rb", "-c", "4")
    wait_until("every job to finish") { redis.llen("finished") == jids.size }
    expect(list_of("finished").map { |j| j["jid"] }).to match_array(jids)
  end
end
