# frozen_string_literal: true

# Running ordered batches in this process (the real engine and shard leases, one processor thread's
# work), reading every transition back from Lowkiq's raw keys.
RSpec.describe "running ordered workers" do
  let(:redis) { TestRedis.client }
  let(:runs) { [] }
  let(:exhausted) { [] }

  before { JobQueue.config.logger.level = Logger::ERROR } # the failures here are on purpose

  def failing_worker(name, runs, exhausted, max_retry_count: 2)
    ordered_worker(name) do
      self.max_retry_count = max_retry_count
      define_singleton_method(:retry_in) { |_count| 0 }
      define_singleton_method(:perform) do |batch|
        runs << batch
        raise ArgumentError, "boom"
      end
      define_singleton_method(:retries_exhausted) { |batch| exhausted << batch }
    end
  end

  def processing_keys(worker)
    redis.keys(lowkiq_key(worker, "processing:*"))
  end

  it "hands perform each id's payloads, oldest first, in batches of batch_size, and counts them processed" do
    worker = ordered_worker("OrderedRunWorker") { self.batch_size = 10 }
    batches = []
    worker.define_singleton_method(:perform) { |batch| batches << batch }
    worker.perform_async([{id: 7, payload: {"v" => 2}, score: 2}, {id: 7, payload: {"v" => 1}, score: 1}, {id: 8}])
    work = ordered_server(worker).thread_work(0)

    drain(work)

    expect(batches.reduce({}, :merge)).to eq("7" => [{"v" => 1}, {"v" => 2}], "8" => [""])
    expect(redis.get(lowkiq_key(worker, "processed")).to_i).to eq(2)
    expect(redis.keys(lowkiq_key(worker, "*")).sort).to eq([lowkiq_key(worker, "processed"), lowkiq_key(worker, "processing_length_by_shard")].sort)
    expect(redis.hvals(lowkiq_key(worker, "processing_length_by_shard")).map(&:to_i)).to all(eq(0))
  end

  it "delivers Marshal payloads as the Ruby objects pushed" do
    seen = []
    worker = ordered_worker("OrderedMarshalRunWorker") { payload_format :marshal }
    worker.define_singleton_method(:perform) { |batch| seen << batch }
    worker.perform_async([{id: "a", payload: {sym: [:x, 1.5]}}])
    drain(ordered_server(worker).thread_work(0))
    expect(seen).to eq([{"a" => [{sym: [:x, 1.5]}]}])
  end

  it "runs server middlewares around perform with (worker, batch)" do
    calls = []
    JobQueue.config.ordered_server_middlewares << ->(worker, batch, &block) { calls << [:outer, worker, batch]; block.call; calls << :outer_done }
    JobQueue.config.ordered_server_middlewares << ->(_worker, _batch, &block) { calls << :inner; block.call }
    worker = ordered_worker("OrderedMiddlewareWorker")
    worker.define_singleton_method(:perform) { |_batch| calls << :perform }
    worker.perform_async([{id: 1, payload: "p"}])
    drain(ordered_server(worker).thread_work(0))
    expect(calls).to eq([[:outer, worker, {"1" => ["p"]}], :inner, :perform, :outer_done])
  end

  it "retries a failure (retry_count -1 → 0 → 1), then sends the oldest payload to the morgue and requeues the rest with retry_count -1" do
    worker = failing_worker("OrderedFailingWorker", runs, exhausted)
    worker.define_singleton_method(:retry_in) { |_count| 1000 } # not due again until made due below
    worker.perform_async([{id: "a", payload: "p1", score: 1}, {id: "a", payload: "p2", score: 2}])
    work = ordered_server(worker).thread_work(0)
    shard = shard_of("a", worker.shards_count)

    expect(work.step).to be(true)
    expect(queued_state(worker, "a")).to include(retry_count: 0.0, payloads: [['"p1"', 1.0], ['"p2"', 2.0]])
    expect(redis.hget(lowkiq_key(worker, "errors"), "a")).to eq("ArgumentError: boom")
    expect(processing_keys(worker)).to be_empty

    expect(JobQueue::Ordered.perform_all_jobs_now(worker)).to eq(1)
    expect(work.step).to be(true)
    expect(queued_state(worker, "a")[:retry_count]).to eq(1.0)

    JobQueue::Ordered.perform_all_jobs_now(worker)
    before = Time.now.to_f
    expect(work.step).to be(true)
    # What is left is due at once, so the settle's fetch has already taken it into processing.
    expect(redis.hget(lowkiq_key(worker, "processing:ids_with_retry_count:#{shard}"), "a")).to eq("-1")
    expect(redis.hget(lowkiq_key(worker, "processing:ids_with_perform_in:#{shard}"), "a").to_f).to be_within(5).of(before)
    expect(zset(lowkiq_key(worker, "processing:payloads:a"))).to eq([['"p2"', 2.0]])
    expect(zset(lowkiq_key(worker, "morgue:all_ids_lex"))).to eq([["a", 0.0]])
    expect(redis.zscore(lowkiq_key(worker, "morgue:all_ids_scored_by_updated_at"), "a")).to be_within(5).of(before)
    expect(zset(lowkiq_key(worker, "morgue:payloads:a"))).to eq([['"p1"', 1.0]])
    expect(redis.hget(lowkiq_key(worker, "morgue:errors"), "a")).to eq("ArgumentError: boom")
    expect(exhausted).to eq([[{id: "a", payloads: [["p1", 1.0]], error: "ArgumentError: boom"}]])
    expect(runs).to eq([{"a" => %w[p1 p2]}] * 3)
    expect(redis.get(lowkiq_key(worker, "failed")).to_i).to eq(3)

    # The payload left behind starts with a fresh budget: its first failure counts 0 again.
    work.step
    expect(runs.last).to eq("a" => ["p2"])
    expect(queued_state(worker, "a")).to include(retry_count: 0.0, payloads: [['"p2"', 2.0]])
  end

  it "retries after retry_in(retry_count) seconds, asking the worker with the new count" do
    counts = []
    worker = ordered_worker("OrderedDelayWorker")
    worker.define_singleton_method(:retry_in) { |count| counts << count; 600 }
    worker.define_singleton_method(:perform) { |_batch| raise "boom" }
    worker.perform_async([{id: "a"}])
    work = ordered_server(worker).thread_work(0)
    before = Time.now.to_f
    expect(work.step).to be(true)
    expect(counts).to eq([0])
    expect(queued_state(worker, "a")[:perform_in]).to be_within(5).of(before + 600)
    expect(work.step).to be(false)
  end

  it "merges a failed id with payloads pushed while it ran: the failed job's perform_in and retry_count win" do
    worker = ordered_worker("OrderedFailedMergeWorker")
    worker.define_singleton_method(:retry_in) { |_count| 300 }
    worker.define_singleton_method(:perform) do |_batch|
      perform_async([{id: "a", payload: "during", score: 5, perform_in: Time.now.to_f + 10_000}])
      raise "boom"
    end
    worker.perform_async([{id: "a", payload: "first", score: 1}])
    work = ordered_server(worker).thread_work(0)
    before = Time.now.to_f
    work.step
    state = queued_state(worker, "a")
    expect(state).to include(retry_count: 0.0, payloads: [['"first"', 1.0], ['"during"', 5.0]])
    expect(state[:perform_in]).to be_within(5).of(before + 300)
  end

  it "files an undecodable payload as a failure of its id, runs the rest of the batch, and keeps the server alive" do
    seen = []
    worker = ordered_worker("OrderedBadDataWorker") do
      self.batch_size = 5
      self.shards_count = 1
      payload_format :marshal
    end
    worker.define_singleton_method(:retry_in) { |_count| 600 }
    worker.define_singleton_method(:perform) { |batch| seen << batch }
    worker.perform_async([{id: "good", payload: 1}])
    redis.zadd(lowkiq_key(worker, "payloads:bad"), 1, "not marshal")
    %w[all_ids_lex all_ids_scored_by_perfrom_in ids_scored_by_perform_in:0].each { |k| redis.zadd(lowkiq_key(worker, k), 0, "bad") }
    redis.zadd(lowkiq_key(worker, "all_ids_scored_by_retry_count"), -1, "bad")
    drain(ordered_server(worker).thread_work(0))
    expect(seen).to eq([{"good" => [1]}])
    expect(queued_state(worker, "bad")).to include(retry_count: 0.0, payloads: [["not marshal", 1.0]])
    expect(redis.hget(lowkiq_key(worker, "errors"), "bad")).to match(/TypeError|ArgumentError/)
  end

  it "puts the in-flight state of a dead owner back in the queue when it takes the shards" do
    worker = ordered_worker("OrderedRecoverWorker") { self.shards_count = 1 }
    worker.define_singleton_method(:perform) { |_batch| raise JobQueue::Shutdown, "killed mid-batch" }
    worker.perform_async([{id: "a", payload: "p"}])
    server = ordered_server(worker)
    expect { server.thread_work(0).step }.to raise_error(JobQueue::Shutdown)
    expect(redis.zrange(lowkiq_key(worker, "processing:payloads:a"), 0, -1)).to eq(['"p"'])
    server.stop
    ordered_servers.delete(server)

    ran = []
    worker.define_singleton_method(:perform) { |batch| ran << batch }
    drain(ordered_server(worker).thread_work(0))
    expect(ran).to eq([{"a" => ["p"]}])
    expect(processing_keys(worker)).to be_empty
  end

  it "puts back, as fetched, the ids a processor thread holds when it dies outside a job" do
    worker = ordered_worker("OrderedAbandonWorker") { self.shards_count = 1 }
    ran = []
    worker.define_singleton_method(:perform) { |batch| ran << batch }
    worker.perform_async([{id: "a", payload: "1", perform_in: 1000.0}, {id: "b", payload: "2", score: 5, perform_in: 2000.0}])
    redis.zadd(lowkiq_key(worker, "all_ids_scored_by_retry_count"), 1, "b") # b failed twice before
    redis.hset(lowkiq_key(worker, "errors"), "b", "RuntimeError: earlier")
    work = ordered_server(worker).thread_work(0)

    expect(work.step).to be(true) # runs a; its settle fetched b, which the thread now holds
    expect(ran).to eq([{"a" => ["1"]}])
    expect(redis.hget(lowkiq_key(worker, "processing:ids_with_perform_in:0"), "b")).not_to be_nil

    expect(work.abandon).to eq(1)
    expect(queued_state(worker, "b")).to eq(lex: 0.0, perform_in: 2000.0, shard_perform_in: 2000.0, retry_count: 1.0, payloads: [['"2"', 5.0]])
    expect(redis.hget(lowkiq_key(worker, "errors"), "b")).to eq("RuntimeError: earlier")
    expect(processing_keys(worker)).to be_empty
    expect(redis.hget(lowkiq_key(worker, "processing_length_by_shard"), "0").to_i).to eq(0)
    expect([redis.get(lowkiq_key(worker, "processed")).to_i, redis.get(lowkiq_key(worker, "failed")).to_i]).to eq([1, 0])
    expect(work.abandon).to eq(0)

    drain(work)
    expect(ran).to eq([{"a" => ["1"]}, {"b" => ["2"]}])
  end

  it "takes several batches of fast ids at once, runs them batch_size at a time, and when going quiet puts back those not started" do
    worker = ordered_worker("OrderedPrefetchWorker") { self.shards_count = 1 }
    batches = []
    worker.define_singleton_method(:perform) { |batch| batches << batch.keys }
    worker.perform_async(60.times.map { |i| {id: i} })
    work = ordered_server(worker).thread_work(0)
    in_hand = -> { redis.hlen(lowkiq_key(worker, "processing:ids_with_perform_in:0")) }

    # A step either runs one batch of what is in hand, or runs the last one and settles them all with
    # the next fetch; the first fetch takes one id, and once batches have been timed as fast, more.
    held = 0
    20.times do
      work.step
      held = in_hand.call
      break if held > 1
    end
    expect(held).to be > 1
    expect(batches).to all(have_attributes(size: 1))

    work.step # runs one of the ids in hand, leaving the others unstarted
    ran = batches.size
    expect(work.finish).to eq(held - 1)
    expect(in_hand.call).to eq(0)
    expect(redis.get(lowkiq_key(worker, "processed")).to_i).to eq(ran)
    expect(redis.zcard(lowkiq_key(worker, "all_ids_lex"))).to eq(60 - ran)
    expect(processing_keys(worker)).to be_empty

    drain(work)
    expect(batches.flatten.sort_by(&:to_i)).to eq(60.times.map(&:to_s))
  end
end
