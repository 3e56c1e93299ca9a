# frozen_string_literal: true

require_relative "support"
require_relative "../apps/reliability_count"

# The acceptance criterion of reliable fetch: a server killed with SIGKILL (no cleanup at all) at
# any point loses no job. Jobs in flight in the dead process run again once a live process recovers
# its working lists, so a job may run twice (reported, allowed) but never zero times.
RSpec.describe "kill -9 in the middle of a run" do
  include_context "with server processes"

  let(:jobs) { 20_000 }
  # Kills happen when this many distinct jobs have run, as observed in Redis.
  let(:kill_after) { [4_000, 9_000, 14_000] }

  it "loses no job across repeated crashes and restarts, and leaves nothing held" do
    started = monotonic
    ReliabilityCountWorker.perform_bulk((1..jobs).map { |id| [id] })
    expect(redis.llen("queue:default")).to eq(jobs)

    server = start_server("reliability_count.rb", "-c", "10")
    kills = kill_after.map do |mark|
      wait_until("#{mark} jobs to have run", timeout: 60) { redis.hlen("runs") >= mark }
      identity = identity_of(server)
      server.kill!
      # What the corpse left behind: taken from the queue, never acknowledged.
      kill = {ran: redis.hlen("runs"), orphaned: held_jobs(identity)}
      server = start_server("reliability_count.rb", "-c", "10")
      kill
    end

    # Drained: nothing waits in the queue, nothing is held by any process, dead or alive (the last
    # corpse's lists are recovered by its successor's liveness beat, ~15-18 s after the kill).
    wait_until("the queue and every working list to be empty", timeout: 60) { outstanding_jobs.zero? }
    status = server.stop
    elapsed = monotonic - started

    runs = redis.hgetall("runs")
    lost = (1..jobs).map(&:to_s) - runs.keys
    duplicates = runs.values.sum(&:to_i) - runs.size
    result = {jobs: jobs, kills: kills, lost: lost.size, duplicates: duplicates, seconds: elapsed.round(1)}
    RSpec.current_example.metadata[:crash_test] = result
    report(format(
      "crash test: %d jobs, %d kill -9 (after %s jobs had run; %s jobs orphaned), " \
      "lost %d, duplicates %d, %.1f s",
      jobs, kills.size, kills.map { |k| k[:ran] }.join("/"), kills.map { |k| k[:orphaned] }.join("/"),
      lost.size, duplicates, elapsed
    ))

    # Each kill hit a busy process mid-run: jobs were in flight and orphaned.
    expect(kills).to all(include(ran: be < jobs, orphaned: be > 0))
    expect(lost).to be_empty, "#{lost.size} job(s) never ran, e.g. #{lost.first(10).join(", ")}"
    expect(runs.keys.map(&:to_i)).to all(be_between(1, jobs))
    # Only a job a corpse held can run twice (it ran, its acknowledgement died with the process).
    expect(duplicates).to be <= kills.sum { |k| k[:orphaned] }
    expect(status.exitstatus).to eq(0)

    # Nothing left behind: no job held or waiting, no failed job, no process registered.
    expect(working_lists).to be_empty
    expect(redis.llen("queue:default")).to eq(0)
    expect(redis.zcard("retry") + redis.zcard("dead") + redis.zcard("schedule")).to eq(0)
    expect(redis.zcard("jq:alive")).to eq(0)
    expect(redis.keys("jq:working:*")).to be_empty
  end
end
