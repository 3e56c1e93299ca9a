# frozen_string_literal: true

require_relative "support"
require_relative "../apps/reliability_outage"

# Redis restarts under a busy server. The server must ride it out: processor threads back off and
# retry instead of dying, connections redial, jobs that failed or were taken while Redis was away
# stay in their working lists and go back to their queue, a fetch whose reply was lost does not leave
# its job behind, and once Redis is back every job runs.
#
# This example has a Redis of its own (not the suite's, which other specs share): a private
# redis-server on a unix socket in its own temp dir, with an fsync'd append-only file, so that what it
# held when it stopped is there again when it restarts on the same socket.
RSpec.describe "Redis restarting under a running server" do
  include_context "with server processes"

  let(:jobs) { 3_000 }
  let(:concurrency) { 25 }
  # The outage begins once this many distinct jobs have run, as observed in Redis.
  let(:stop_after) { 300 }
  let(:outage_redis) do
    JobQueue::Testing::RedisServer.new(
      args: %w[--appendonly yes --appendfsync always], prefix: "queue-outage-redis"
    )
  end

  # Every helper of ReliabilityHelpers reads this Redis, not the suite's.
  def redis
    @outage_client ||= Redis.new(path: outage_redis.socket)
  end

  def disconnect_client
    @outage_client&.close
    @outage_client = nil
  end

  before do
    outage_redis.start
    JobQueue.configure { |c| c.redis = {url: outage_redis.url} }
  end

  after do |example|
    servers.each(&:ensure_stopped)
    if example.exception && outage_redis.pid
      held = working_lists.to_h { |key| [key, redis.llen(key)] }
      warn("--- left in the outage Redis: queue:default #{redis.llen("queue:default")}, " \
           "retry #{redis.zcard("retry")}, working lists #{held}")
    end
    disconnect_client
    warn("--- log of the outage redis-server:\n#{File.read(outage_redis.log)}") if example.exception && outage_redis.dir
    outage_redis.stop
  end

  it "loses no job, keeps running, drains everything and stops cleanly once Redis is back" do
    ReliabilityOutageWorker.perform_bulk((1..jobs).map { |id| [id] })
    expect(redis.llen("queue:default")).to eq(jobs)

    server = ServerProcess.new(
      app: "reliability_outage.rb", args: ["-c", concurrency.to_s], env: {"REDIS_URL" => outage_redis.url}
    )
    servers << server.start
    identity = identity_of(server)

    wait_until("#{stop_after} jobs to have run", timeout: 30) { redis.hlen("runs") >= stop_after }
    # Jobs in flight when Redis goes away: taken from the queue, not yet acknowledged.
    held = held_jobs(identity)
    ran_before = redis.hlen("runs")

    # SHUTDOWN by TERM: redis-server writes its append-only file and exits; its socket goes with it.
    disconnect_client
    outage_redis.stop(keep_dir: true)
    expect(File.exist?(outage_redis.socket)).to be(false)
    # Down long enough for the server to meet it everywhere: a connection fails to redial, and a job
    # fails (its record cannot be written) whose failure the engine cannot file either.
    wait_until("the server to fail to redial, and a job to fail, while Redis is gone", timeout: 20) do
      output = server.output
      output.match?(/engine call failed.*No such file or directory/) && output.include?("could not record its run")
    end
    expect(server.running?).to be(true)

    # Back on the same socket, from the same directory.
    outage_redis.start
    ran_after_restart = redis.hlen("runs")
    expect(ran_after_restart).to be >= ran_before # the append-only file kept what was written

    # Drained: nothing waiting in the queue, held in a working list, or waiting to be retried.
    wait_until("the queue, every working list and the retry set to be empty", timeout: 30) do
      outstanding_jobs.zero? && redis.zcard("retry").zero? && redis.zcard("schedule").zero?
    end
    runs = redis.hgetall("runs")
    lost = (1..jobs).map(&:to_s) - runs.keys
    duplicates = runs.values.sum(&:to_i) - runs.size
    output = server.output

    expect(server.running?).to be(true), "the server exited during or after the outage:\n#{output}"
    status = server.stop

    report(format(
      "redis outage: %d jobs, Redis stopped after %d had run (%d held), %d had run when it was back; " \
      "meanwhile %d job run(s) and %d engine call(s) failed, %d lost fetch repl(ies) claimed; " \
      "lost %d, duplicates %d",
      jobs, ran_before, held, ran_after_restart, output.scan("could not record its run").size,
      output.scan("engine call failed").size, output.scan("a fetch's reply was lost").size, lost.size, duplicates
    ))

    # The outage hit a busy server, in the middle of the work.
    expect(held).to be > 0
    expect(ran_after_restart).to be < jobs
    expect(lost).to be_empty, "#{lost.size} job(s) never ran, e.g. #{lost.first(10).join(", ")}"
    expect(runs.keys.map(&:to_i)).to all(be_between(1, jobs))
    # A job runs twice only if its record was written but the reply died with Redis (the job raised
    # and ran again): at most one such write in flight per thread.
    expect(duplicates).to be <= concurrency
    expect(output).not_to match(/ died: |panicked/)
    expect(status.exitstatus).to eq(0)

    # Nothing left behind: no job held or waiting, no failed job, no process registered.
    expect(working_lists).to be_empty
    expect(redis.keys("jq:working:*")).to be_empty
    expect(redis.keys("jq:fetched:*")).to be_empty
    expect(redis.llen("queue:default")).to eq(0)
    expect(redis.zcard("retry") + redis.zcard("dead") + redis.zcard("schedule")).to eq(0)
    expect(redis.smembers("processes")).to be_empty
    expect(redis.zcard("jq:alive")).to eq(0)
  end
end
