# frozen_string_literal: true

require_relative "../apps/iterable"

# Sidekiq 7.3's iterable jobs on a real server: all items, the cursor kept across a TERM in the job's
# `it-<jid>` hash, cancellation, and a job Sidekiq 7.3 or 8.0 interrupted, resumed from its hash.
RSpec.describe "iterable jobs in a server process" do
  let(:redis) { TestRedis.client }

  def runs(name) = redis.hgetall("it:runs:#{name}").transform_values(&:to_i)

  def events(name) = redis.lrange("it:events:#{name}", 0, -1)

  def built_from(name) = recorded("it:built:#{name}").map { |entry| entry["cursor"] }

  def items(range) = range.to_h { |i| ["item-#{i}", 1] }

  def server(*args) = start_server(app: "iterable.rb", args: ["-c", "2", *args])

  # The job's run is over once its last callback ran and its state is gone (cleanup comes after).
  def wait_for_completion(name, jid)
    wait_until("#{name} to complete") { events(name).last == "on_complete" }
    wait_until("it-#{jid} to be deleted") { !redis.exists?("it-#{jid}") }
    wait_until("the job to be acknowledged") { redis.llen("queue:default").zero? && redis.scan_each(match: "jq:working:*", type: "list").none? { |k| redis.llen(k).positive? } }
  end

  it "runs every item once, in order, with its callbacks, and leaves no state behind" do
    jid = IterableArrayJob.perform_async("all", 6, 0)
    server
    wait_for_completion("all", jid)

    expect(runs("all")).to eq(items(0...6))
    expect(redis.get("it:around:all")).to eq("6")
    expect(events("all")).to eq(%w[on_start on_stop on_complete])
    expect(built_from("all")).to eq([nil])
    expect(redis.zcard("retry") + redis.zcard("dead")).to eq(0)
  end

  it "saves the cursor on TERM, re-queues the job, and resumes it on the next server: each item once" do
    jid = IterableArrayJob.perform_async("term", 40, 0.05)
    first = server("-t", "10")
    wait_until("5 items to run") { redis.get("it:count:term").to_i >= 5 }
    expect(first.stop("TERM").exitstatus).to eq(0)

    done = runs("term")
    expect(done).to eq(items(0...done.size)) # in order, none twice
    expect(done.size).to be_between(5, 39)
    state = redis.hgetall("it-#{jid}")
    expect(state.keys).to match_array(%w[ex c rt])
    expect(state).to include("ex" => "1", "c" => done.size.to_s) # the first item not run
    expect(Float(state["rt"])).to be > 0
    expect(redis.ttl("it-#{jid}")).to be_within(120).of(30 * 86_400)
    expect(queued_jobs.map { |job| [job["jid"], job["class"], job["args"]] }).to eq([[jid, "IterableArrayJob", ["term", 40, 0.05]]])
    expect(redis.zcard("retry")).to eq(0)
    expect(events("term")).to eq(%w[on_start on_stop])
    expect(first.output).to include("stopped; 0 unfinished job(s)") # pushed back by us, not the engine

    server
    wait_for_completion("term", jid)
    expect(runs("term")).to eq(items(0...40))
    expect(redis.get("it:around:term")).to eq("40")
    expect(built_from("term")).to eq([nil, done.size])
    expect(events("term")).to eq(%w[on_start on_stop on_resume on_stop on_complete])
  end

  it "is interrupted by quiet (TSTP) too, as Sidekiq's quiet processors are: re-queued with its cursor, the server still up" do
    jid = IterableArrayJob.perform_async("quiet", 40, 0.05)
    quiet = server
    wait_until("3 items to run") { redis.get("it:count:quiet").to_i >= 3 }
    quiet.signal("TSTP")
    wait_until("the job to be back in its queue") { queued_jobs.map { |job| job["jid"] } == [jid] }

    done = runs("quiet")
    expect(done).to eq(items(0...done.size))
    expect(redis.hgetall("it-#{jid}")).to include("ex" => "1", "c" => done.size.to_s)
    expect(events("quiet")).to eq(%w[on_start on_stop])
    expect(quiet).to be_running
  end

  it "stops a running job that Client#cancel! marked, at its next state write" do
    jid = IterableArrayJob.perform_async("cancel", 1000, 0.01)
    server
    wait_until("3 items to run") { redis.get("it:count:cancel").to_i >= 3 }
    at = JobQueue::Client.new.cancel!(jid)
    expect(at).to be_within(5).of(Time.now.to_i)
    expect(redis.hget("it-#{jid}", "cancelled")).to eq(at.to_s)
    expect(JobQueue::Client.new.cancel!(jid)).to eq(at) # the first call's time

    wait_for_completion("cancel", jid)
    expect(redis.get("it:count:cancel").to_i).to be < 1000
    expect(events("cancel")).to eq(%w[on_start on_cancel on_stop on_complete])
    expect(redis.zcard("retry")).to eq(0)
  end

  it "runs no item of a job cancelled before it started" do
    jid = IterableArrayJob.perform_async("early", 5, 0)
    JobQueue::Client.new.cancel!(jid)
    expect(redis.hgetall("it-#{jid}").keys).to eq(["cancelled"])
    server
    wait_for_completion("early", jid)

    expect(runs("early")).to be_empty
    expect(events("early")).to eq(%w[on_start on_cancel on_stop on_complete])
  end

  it "stops a job that called its own cancel!, at its next state write" do
    jid = IterableSelfCancellingJob.perform_async("self", 3)
    server
    wait_until("the job to complete", timeout: 20) { redis.lrange("it:events:self", 0, -1).last == "on_complete" }
    wait_until("it-#{jid} to be deleted") { !redis.exists?("it-#{jid}") }

    expect(redis.get("it:cancelled_at:self").to_i).to be_within(10).of(Time.now.to_i)
    expect(redis.get("it:count:self").to_i).to be_between(4, 999)
    expect(redis.lrange("it:events:self", 0, -1)).to eq(%w[on_cancel on_complete])
  end

  it "saves the cursor of an item that raised, so the retry starts at that item" do
    redis.set("it:fail:retry", "1")
    jid = IterableFailingOnceJob.perform_async("retry", 6, 4)
    server
    wait_until("the failure in the retry set") { redis.zcard("retry") == 1 || events("retry").any? }
    expect(redis.hgetall("it-#{jid}")).to include("ex" => "1", "c" => "4")
    wait_for_completion("retry", jid)

    expect(built_from("retry")).to eq([nil, 4])
    expect(runs("retry")).to eq(items(0...6))
  end

  {"7.3" => "7_3", "8.0" => "8_0"}.each do |version, suffix|
    it "resumes a job Sidekiq #{version} interrupted, from the cursor in its it-<jid> hash" do
      job = Sidekiq8Fixtures.job("iterable_job_#{suffix}.json")
      state = Sidekiq8Fixtures.job("iterable_state_#{suffix}.json")
      key = "it-#{job["jid"]}"
      redis.hset(key, state)
      redis.expire(key, 30 * 86_400)
      redis.lpush("queue:default", Sidekiq8Fixtures.raw("iterable_job_#{suffix}.json"))
      server
      wait_for_completion("fixture", job["jid"])

      expect(built_from("fixture")).to eq([3])
      expect(runs("fixture")).to eq(items(3...8))
      expect(events("fixture")).to eq(%w[on_resume on_stop on_complete])
    end
  end
end
