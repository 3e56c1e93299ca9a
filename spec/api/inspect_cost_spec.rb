# frozen_string_literal: true

require "queue/api"

# What a page of the inspection API costs Redis, measured by Redis itself (`INFO commandstats`, which
# counts every command, those a script runs included): the same commands, and no more time, with
# 1,000,000 jobs in a queue and 100,000 in the retry set as with a handful. Nothing reads a whole set.
RSpec.describe "the inspection API's cost per page" do
  BIG_QUEUE = 1_000_000
  BIG_RETRY = 100_000

  # Commands run (by name) and microseconds Redis spent in them, from INFO commandstats.
  def commandstats
    TestRedis.client.info("commandstats").to_h { |name, fields| [name, [fields["calls"].to_i, fields["usec"].to_f]] }
  end

  # The commands `block` made Redis run (name => calls) and the time Redis spent on them.
  def cost
    before = commandstats
    yield
    after = commandstats
    deltas = after.to_h { |name, (calls, usec)| [name, [calls - before.fetch(name, [0, 0])[0], usec - before.fetch(name, [0, 0.0])[1]]] }
    deltas.delete("info")
    deltas.select! { |_, (calls, _)| calls.positive? }
    [deltas.transform_values(&:first), deltas.sum { |_, (_, usec)| usec }]
  end

  # Fills `queue:big` and `retry` with `queued` and `retrying` small jobs, in Redis (a Lua loop).
  def fill(queued, retrying)
    TestRedis.client.eval(<<~LUA, keys: ["queue:big", "retry", "queues"], argv: [queued, retrying])
      local function job(i, class) return '{"class":"' .. class .. '","args":[' .. i .. '],"jid":"' .. string.format('%024x', i) .. '","queue":"big","enqueued_at":1700000000.5,"retry_count":0}' end
      local batch = {}
      for i = 1, tonumber(ARGV[1]) do
        batch[#batch + 1] = job(i, i % 1000 == 0 and 'Rare' or 'Common')
        if #batch == 1000 then redis.call('LPUSH', KEYS[1], unpack(batch)); batch = {} end
      end
      if #batch > 0 then redis.call('LPUSH', KEYS[1], unpack(batch)) end
      batch = {}
      for i = 1, tonumber(ARGV[2]) do
        batch[#batch + 1] = 1700000000 + i
        batch[#batch + 1] = job(i, i % 1000 == 0 and 'Rare' or 'Common')
        if #batch == 2000 then redis.call('ZADD', KEYS[2], unpack(batch)); batch = {} end
      end
      if #batch > 0 then redis.call('ZADD', KEYS[2], unpack(batch)) end
      redis.call('SADD', KEYS[3], 'big')
      return 1
    LUA
  end

  let(:queue) { JobQueue::Queue.new("big") }
  let(:retries) { JobQueue::RetrySet.new }

  # Each paging call the dashboard makes, near the start and deep inside.
  def calls
    {
      "queue page 0" => -> { queue.page(0, 25) },
      "queue page deep" => -> { queue.page(queue.size / 2, 25) },
      "queue filter" => -> { queue.page(0, 25, filter: "Rare") },
      "queue size+latency" => -> { [queue.size, queue.latency] },
      "retry page 0" => -> { retries.page(0, 25) },
      "retry page deep" => -> { retries.page(retries.size - 25, 25) },
      "retry filter" => -> { retries.page(0, 25, filter: "Rare") },
      "retry scan step" => -> { JobQueue::API.engine.api_set_scan("retry", "*Rare*", 0, 100) },
      "retry fetch+retry" => -> { retries.fetch(1_700_000_000.0 + (@next_score = (@next_score || 4) + 1)).first.retry },
      "stats" => -> { JobQueue::Stats.new.processed },
      "history" => -> { JobQueue::Stats::History.new(30).processed }
    }
  end

  def measure
    calls.transform_values do |call|
      call.call # warm: scripts loaded, connection dialled
      cost(&call)
    end
  end

  it "runs the same commands for a page of a huge queue or set as of a tiny one, in bounded time" do
    fill(50, 50)
    small = measure
    TestRedis.flush
    @next_score = nil
    fill(BIG_QUEUE, BIG_RETRY)
    expect([queue.size, retries.size]).to eq([BIG_QUEUE, BIG_RETRY])
    big = measure
    warn big.inspect if ENV["SHOW_COST"]

    calls.each_key do |name|
      expect(big[name][0]).to eq(small[name][0]), "#{name}: #{big[name][0]} vs #{small[name][0]} with a tiny set"
      # Redis time per call stays far below reading the set (an LRANGE of 1,000,000 jobs takes
      # ~100 ms; a ZRANGE of 100,000 ~20 ms).
      expect(big[name][1]).to be < 5_000, "#{name}: #{big[name][1]} µs in Redis"
    end
    expect(big["queue page 0"][0]).to eq("llen" => 1, "lrange" => 1)
    expect(big["retry page 0"][0]).to eq("zcard" => 1, "zrange" => 1)
    expect(queue.page(0, 25, filter: "Rare").entries.map(&:klass)).to all(eq("Rare"))
  ensure
    TestRedis.flush
  end
end
