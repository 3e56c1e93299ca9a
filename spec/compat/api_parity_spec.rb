# frozen_string_literal: true

require_relative "compat_helper"
require "queue/api"

# The same operations through Sidekiq 6.4.1's API and through ours, on the same data (pushed by our
# client and by Sidekiq's), give the same answers and leave Redis in the same state.
RSpec.describe "JobQueue's inspection API against Sidekiq::API 6.4.1", :compat do
  let(:now) { Time.now.to_f }

  # Queues and sets filled by both clients; failures written as our engine files them.
  def fill
    @ours = CompatEcho.set(queue: "parked").perform_bulk([["a", 1], ["b", 2**70], ["c", 0.1]])
    @theirs = Sidekiq::Client.push_bulk("class" => "TheirWorker", "queue" => "parked", "args" => [["x"], ["y"]])
    CompatEcho.perform_async("default one")
    CompatEcho.perform_in(3600, "later")
    Sidekiq::Client.push("class" => "TheirWorker", "args" => ["their later"], "at" => now + 7200)
    failure = {"queue" => "default", "retry" => true, "error_class" => "CompatError", "error_message" => "boom", "failed_at" => now - 60}
    5.times do |i|
      job = failure.merge("class" => (i.even? ? "CompatFlaky" : "TheirWorker"), "args" => [i, "x" * i], "jid" => format("%024x", i + 1),
        "retry_count" => i, "created_at" => now - 100, "enqueued_at" => now - 90)
      JobQueue::RetrySet.new.schedule(now + 30 + i, job) if i < 3
      Sidekiq::RetrySet.new.schedule(now + 30 + i, job) if i >= 3
      Sidekiq::DeadSet.new.schedule(now - 1000 + i, job.merge("jid" => format("%024x", i + 100), "retry" => 0))
    end
    # Two retry entries with the same score: Sidekiq tells them apart by jid.
    twin = failure.merge("class" => "CompatFlaky", "args" => ["twin"], "retry_count" => 1, "created_at" => now - 100)
    Sidekiq::RetrySet.new.schedule(now + 500, twin.merge("jid" => "twin" * 6))
    Sidekiq::RetrySet.new.schedule(now + 500, twin.merge("jid" => "twi2" * 6))
    redis.incrby("stat:processed", 42)
    redis.incrby("stat:failed", 7)
    redis.set("stat:processed:#{Time.now.utc.strftime("%Y-%m-%d")}", 5)
  end

  # Every key and its contents, with times written during the operation (`enqueued_at`, a dead
  # score) replaced by :now, and jobs parsed (Sidekiq's client reorders a pushed job's keys).
  def state(since)
    redis.keys("*").sort.to_h do |key|
      value = case redis.type(key)
      when "list" then redis.lrange(key, 0, -1).map { |j| job(j, since) }
      when "zset" then redis.zrange(key, 0, -1, with_scores: true).map { |j, s| [job(j, since), fresh(s, since)] }.sort_by(&:inspect)
      when "set" then redis.smembers(key).sort
      when "hash" then redis.hgetall(key)
      else redis.get(key)
      end
      [key, value]
    end
  end

  def job(json, since)
    JSON.parse(json).to_h { |k, v| [k, k == "enqueued_at" ? fresh(v, since) : v] }
  rescue JSON::ParserError
    json
  end

  def fresh(time, since) = (time.is_a?(Numeric) && time >= since && time <= Time.now.to_f + 1) ? :now : time

  # Runs `sidekiq` on the data, then `ours` on the same data restored, and compares answers and Redis.
  def same_effect(sidekiq, ours)
    fill
    dump = redis.keys("*").to_h { |k| [k, redis.dump(k)] }
    since = Time.now.to_f
    theirs = sidekiq.call
    after_sidekiq = state(since)
    redis.flushdb
    dump.each { |k, v| redis.restore(k, 0, v) }
    since = Time.now.to_f
    mine = ours.call
    expect(state(since)).to eq(after_sidekiq)
    [theirs, mine]
  end

  def record(r) = [r.jid, r.klass, r.args, r.queue, r.item, r.value, r.enqueued_at, r.created_at, r.display_class, r.display_args, r.tags, r.error_backtrace]

  def entry(e) = record(e) + [e.score, e.at, e.error?]

  it "reads queues, sets and stats the same" do
    fill
    expect(JobQueue::Queue.all.map(&:name)).to eq(Sidekiq::Queue.all.map(&:name))
    %w[parked default empty].each do |name|
      expect(JobQueue::Queue.new(name).size).to eq(Sidekiq::Queue.new(name).size)
      expect(JobQueue::Queue.new(name).map { |r| record(r) }).to eq(Sidekiq::Queue.new(name).map { |r| record(r) })
      expect(JobQueue::Queue.new(name).latency).to be_within(0.5).of(Sidekiq::Queue.new(name).latency)
    end
    (@ours + @theirs + ["nope"]).each do |jid|
      expect(JobQueue::Queue.new("parked").find_job(jid)&.then { |r| record(r) }).to eq(Sidekiq::Queue.new("parked").find_job(jid)&.then { |r| record(r) })
    end

    [[JobQueue::ScheduledSet, Sidekiq::ScheduledSet], [JobQueue::RetrySet, Sidekiq::RetrySet], [JobQueue::DeadSet, Sidekiq::DeadSet]].each do |ours, theirs|
      expect(ours.new.size).to eq(theirs.new.size)
      expect(ours.new.map { |e| entry(e) }).to eq(theirs.new.map { |e| entry(e) })
      expect(ours.new.scan("TheirWorker").map { |e| entry(e) }.sort_by(&:inspect)).to eq(theirs.new.scan("TheirWorker").map { |e| entry(e) }.sort_by(&:inspect))
      theirs.new.each do |e|
        expect(entry(ours.new.find_job(e.jid))).to eq(entry(e))
        expect(ours.new.fetch(e.score).map { |x| entry(x) }).to eq(theirs.new.fetch(e.score).map { |x| entry(x) })
        expect(ours.new.fetch(e.score, e.jid).map { |x| entry(x) }).to eq(theirs.new.fetch(e.score, e.jid).map { |x| entry(x) })
      end
      expect(ours.new.find_job("0" * 24)).to be_nil
    end

    stats, theirs = JobQueue::Stats.new, Sidekiq::Stats.new
    %i[processed failed scheduled_size retry_size dead_size enqueued processes_size workers_size].each do |stat|
      expect(stats.public_send(stat)).to eq(theirs.public_send(stat)), stat.to_s
    end
    expect(stats.default_queue_latency).to be_within(0.5).of(theirs.default_queue_latency)
    expect(stats.queues.to_a).to eq(theirs.queues.to_a)
    [1, 7].each do |days|
      expect(JobQueue::Stats::History.new(days).processed).to eq(Sidekiq::Stats::History.new(days).processed)
      expect(JobQueue::Stats::History.new(days, Date.today - 3).failed).to eq(Sidekiq::Stats::History.new(days, Date.today - 3).failed)
    end
  end

  it "retries, adds to queue, kills and deletes entries with the same effect in Redis" do
    pick = ->(set, i) { set.new.to_a[i] }
    {retry: 1, add_to_queue: 0, kill: 2, delete: 3}.each do |action, i|
      theirs, mine = same_effect(-> { pick.call(Sidekiq::RetrySet, i).public_send(action) }, -> { pick.call(JobQueue::RetrySet, i).public_send(action) })
      expect(mine).to be_truthy, "#{action}: #{mine.inspect} (Sidekiq: #{theirs.inspect})"
      redis.flushdb
    end
    # The twins share a score: each action takes only the entry with its jid.
    %i[retry kill delete].each do |action|
      same_effect(-> { Sidekiq::RetrySet.new.find_job("twi2" * 6).public_send(action) }, -> { JobQueue::RetrySet.new.find_job("twi2" * 6).public_send(action) })
      redis.flushdb
    end
    same_effect(-> { Sidekiq::ScheduledSet.new.to_a.last.add_to_queue }, -> { JobQueue::ScheduledSet.new.to_a.last.add_to_queue })
    redis.flushdb
    same_effect(-> { Sidekiq::DeadSet.new.to_a.first.retry }, -> { JobQueue::DeadSet.new.to_a.first.retry })
    redis.flushdb
    same_effect(-> { Sidekiq::DeadSet.new.delete(Sidekiq::DeadSet.new.first.score, format("%024x", 104)) },
      -> { JobQueue::DeadSet.new.delete(JobQueue::DeadSet.new.first.score, format("%024x", 104)) })
  end

  it "bulk actions, queue deletes, clears and stats reset leave Redis the same" do
    ops = {
      retry_all: [-> { Sidekiq::RetrySet.new.retry_all }, -> { JobQueue::RetrySet.new.retry_all }],
      kill_all: [-> { Sidekiq::RetrySet.new.kill_all }, -> { JobQueue::RetrySet.new.kill_all }],
      dead_retry_all: [-> { Sidekiq::DeadSet.new.retry_all }, -> { JobQueue::DeadSet.new.retry_all }],
      dead_kill: [-> { Sidekiq::DeadSet.new.kill(JSON.generate("class" => "K", "jid" => "k" * 24), notify_failure: false) },
        -> { JobQueue::DeadSet.new.kill(JSON.generate("class" => "K", "jid" => "k" * 24), notify_failure: false) }],
      clear_set: [-> { Sidekiq::ScheduledSet.new.clear }, -> { JobQueue::ScheduledSet.new.clear }],
      clear_queue: [-> { Sidekiq::Queue.new("parked").clear }, -> { JobQueue::Queue.new("parked").clear }],
      delete_job: [-> { Sidekiq::Queue.new("parked").find_job(@theirs.first).delete }, -> { JobQueue::Queue.new("parked").find_job(@theirs.first).delete }],
      delete_while_iterating: [-> { Sidekiq::Queue.new("parked").each { |r| r.delete if r.args.first != "b" } },
        -> { JobQueue::Queue.new("parked").each { |r| r.delete if r.args.first != "b" } }],
      delete_entries_while_iterating: [-> { Sidekiq::DeadSet.new.each { |e| e.delete if e.args.first.odd? } },
        -> { JobQueue::DeadSet.new.each { |e| e.delete if e.args.first.odd? } }],
      reschedule: [-> { Sidekiq::ScheduledSet.new.first.reschedule(now + 10) }, -> { JobQueue::ScheduledSet.new.first.reschedule(now + 10) }],
      reset: [-> { Sidekiq::Stats.new.reset("failed") }, -> { JobQueue::Stats.new.reset("failed") }],
      reset_all: [-> { Sidekiq::Stats.new.reset }, -> { JobQueue::Stats.new.reset }]
    }
    ops.each do |name, (sidekiq, ours)|
      same_effect(sidekiq, ours)
    rescue RSpec::Expectations::ExpectationNotMetError => e
      raise e.exception("#{name}: #{e.message}")
    ensure
      redis.flushdb
    end
  end

  it "sees processes and their work the same, prunes the same and signals the same" do
    beat = now
    %w[host:1:aaa host:2:bbb].each_with_index do |id, i|
      info = {"hostname" => "host", "pid" => i + 1, "identity" => id, "tag" => "t", "concurrency" => 5, "queues" => %w[default], "labels" => [], "started_at" => beat - 100}
      redis.sadd("processes", id)
      redis.hset(id, "info", JSON.generate(info), "busy", i + 1, "beat", beat, "quiet", "false", "rss", 1000 * (i + 1), "rtt_us", 40)
      work = {"queue" => "default", "run_at" => beat.to_i - i, "payload" => JSON.generate("class" => "W", "jid" => "j#{i}", "args" => [i])}
      redis.hset("#{id}:workers", "tid#{i}", JSON.generate(work))
    end
    redis.sadd("processes", "host:3:gone") # its hash expired
    attribs = ->(set) { set.map { |p| p.instance_variable_get(:@attribs) } }

    expect(attribs.call(JobQueue::ProcessSet.new(false))).to eq(attribs.call(Sidekiq::ProcessSet.new(false)))
    expect(JobQueue::ProcessSet.new(false).size).to eq(Sidekiq::ProcessSet.new(false).size)
    expect(JobQueue::Workers.new.to_a).to eq(Sidekiq::Workers.new.to_a)
    expect(JobQueue::Workers.new.size).to eq(Sidekiq::Workers.new.size)
    expect(JobQueue::ProcessSet.new(false).total_concurrency).to eq(Sidekiq::ProcessSet.new(false).total_concurrency)
    expect(JobQueue::ProcessSet.new(false).total_rss).to eq(Sidekiq::ProcessSet.new(false).total_rss)

    expect(JobQueue::ProcessSet.new.cleanup).to eq(0) # the constructor already pruned it
    expect(redis.smembers("processes").sort).to eq(%w[host:1:aaa host:2:bbb])
    mine = JobQueue::ProcessSet.new.first
    mine.quiet!
    mine.stop!
    expect(redis.lrange("host:1:aaa-signals", 0, -1)).to eq(%w[TERM TSTP])
    redis.del("host:1:aaa-signals")
    Sidekiq::ProcessSet.new.first.quiet!
    Sidekiq::ProcessSet.new.first.stop!
    expect(redis.lrange("host:1:aaa-signals", 0, -1)).to eq(%w[TERM TSTP])
    expect(redis.ttl("host:1:aaa-signals")).to be_between(1, 60)
  end
end
