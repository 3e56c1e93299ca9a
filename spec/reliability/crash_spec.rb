# frozen_string_literal: true

require_relative "support"
require_relative "../apps/reliability_count"

# The acceptance criterion of reliable fetch: a server killed with SIGKILL (no cleanup at all) at
# any point loses no job, and runs again only the few jobs it was running when it died.
#
# Every run is recorded under the pid of the process that ran it (spec/apps/reliability_count.rb), and
# the processes run one after another, so each job's history is the list of processes that ran it, in
# order. A duplicate of a kill is a job the killed process ran that ran again afterwards: it finished
# (or was finishing) there, but its acknowledgement died with the process. With one job running per
# thread, a kill should cost at most `concurrency` such reruns.
#
# Run over both transports: over TCP a finished job's acknowledgement waits in the kernel for the
# thread's next fetch (ARCHITECTURE.md, "What the per-job ack costs"), and must still reach Redis
# when the process is killed.
RSpec.shared_examples "a crash-safe fetch" do
  let(:jobs) { 30_000 }
  let(:concurrency) { 10 }
  # Each server is killed once it has run this many jobs itself, leaving work in the queue.
  let(:kill_after) { [8_000, 9_000] }

  def start_counting_server
    start_server("reliability_count.rb", "-c", concurrency.to_s, env: {"REDIS_URL" => redis_url})
  end

  def runs_of(pid)
    redis.hlen("runs:#{pid}")
  end

  # job id => pids of the processes that ran it, once per run, in the order the processes ran.
  def histories(pids)
    pids.each_with_object(Hash.new { |h, id| h[id] = [] }) do |pid, history|
      redis.hgetall("runs:#{pid}").each { |id, count| count.to_i.times { history[id] << pid } }
    end
  end

  it "loses no job across two crashes, reruns at most one job per thread per crash, and leaves nothing held" do
    started = monotonic
    ReliabilityCountWorker.perform_bulk((1..jobs).map { |id| [id] })
    expect(redis.llen("queue:default")).to eq(jobs)

    server = start_counting_server
    kills = kill_after.map do |mark|
      wait_until("server #{server.pid} to run #{mark} jobs", timeout: 60) { runs_of(server.pid) >= mark }
      identity = identity_of(server)
      server.kill!
      # What the corpse left behind: taken from the queue, never acknowledged.
      kill = {pid: server.pid, ran: runs_of(server.pid), orphaned: held_jobs(identity), queued: redis.llen("queue:default")}
      server = start_counting_server
      kill
    end

    # Drained: nothing waits in the queue, nothing is held by any process, dead or alive (the last
    # corpse's lists are recovered by its successor's liveness beat, ~15-18 s after the kill).
    wait_until("the queue and every working list to be empty", timeout: 60) { outstanding_jobs.zero? }
    status = server.stop
    elapsed = monotonic - started

    killed = kills.map { |k| k[:pid] }
    pids = [*killed, server.pid]
    history = histories(pids)
    lost = (1..jobs).map(&:to_s) - history.keys
    duplicates = kills.map { |k| history.count { |_, ran| ran.include?(k[:pid]) && ran.last != k[:pid] } }
    reruns = history.values.sum { |ran| ran.size - 1 }
    result = {jobs: jobs, concurrency: concurrency, kills: kills.zip(duplicates).map { |k, d| k.merge(duplicates: d) },
              lost: lost.size, duplicates: reruns, seconds: elapsed.round(1)}
    RSpec.current_example.metadata[:crash_test] = result
    report(format(
      "crash test (%s): %d jobs, -c %d, %d kill -9 (after the killed process ran %s jobs; %s jobs orphaned), " \
      "duplicates per kill %s, lost %d, %.1f s",
      redis_url.start_with?("unix:") ? "unix socket" : "TCP", jobs, concurrency, kills.size, kills.map { |k| k[:ran] }.join("/"), kills.map { |k| k[:orphaned] }.join("/"),
      duplicates.join("/"), lost.size, elapsed
    ))

    # Each kill hit a busy process mid-run: jobs were in flight and orphaned, and others still queued.
    expect(kills).to all(include(orphaned: be > 0, queued: be > 0))
    expect(lost).to be_empty, "#{lost.size} job(s) never ran, e.g. #{lost.first(10).join(", ")}"
    expect(history.keys.map(&:to_i)).to all(be_between(1, jobs))
    expect(redis.keys("runs:*")).to match_array(pids.map { |pid| "runs:#{pid}" })
    # No process ran a job twice, and only a killed process's run can be followed by another one.
    expect(history.select { |_, ran| ran.uniq.size < ran.size }).to be_empty
    expect(history.select { |_, ran| (ran[0...-1] - killed).any? }).to be_empty
    expect(duplicates.sum).to eq(reruns)
    # A rerun job was held by the corpse (it ran, its acknowledgement died with the process) ...
    kills.zip(duplicates).each { |k, d| expect(d).to be <= k[:orphaned] }
    # ... and at most one job per thread was running when it died.
    expect(duplicates).to all(be <= concurrency), "duplicates per kill #{duplicates.join("/")}, at most #{concurrency} allowed"
    expect(status.exitstatus).to eq(0)

    # Nothing left behind: no job held or waiting, no failed job, no process registered.
    expect(working_lists).to be_empty
    expect(redis.llen("queue:default")).to eq(0)
    expect(redis.zcard("retry") + redis.zcard("dead") + redis.zcard("schedule")).to eq(0)
    expect(redis.zcard("jq:alive")).to eq(0)
    expect(redis.keys("jq:working:*")).to be_empty
  end
end

RSpec.describe "kill -9 in the middle of a run" do
  include_context "with server processes"

  {"a unix socket" => :url, "TCP" => :tcp_url}.each do |transport, url|
    context "over #{transport}" do
      let(:redis_url) { TestRedis.public_send(url) }

      include_examples "a crash-safe fetch"
    end
  end
end
