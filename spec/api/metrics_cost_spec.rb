# frozen_string_literal: true

require "queue/metrics"

# What one /metrics scrape costs Redis, measured by Redis itself (`INFO commandstats`): the same
# commands, as many times, with 100,000 queued jobs (and as many retrying and dead) as with 10.
RSpec.describe "the cost of a metrics scrape" do
  def commandstats
    TestRedis.client.info("commandstats").to_h { |name, fields| [name, fields["calls"].to_i] }
  end

  # Commands (name => calls) Redis ran for the block.
  def commands
    before = commandstats
    yield
    after = commandstats
    after.to_h { |name, calls| [name, calls - before.fetch(name, 0)] }.reject { |name, n| name == "cmdstat_info" || n.zero? }
  end

  # `n` small jobs in queue:big, retry and dead (a Lua loop inside Redis).
  def fill(n)
    TestRedis.client.eval(<<~LUA, keys: ["queue:big", "retry", "dead", "queues"], argv: [n])
      local batch, scored = {}, {}
      for i = 1, tonumber(ARGV[1]) do
        local job = '{"class":"W","args":[' .. i .. '],"jid":"' .. string.format('%024x', i) .. '","queue":"big","enqueued_at":1700000000.5}'
        batch[#batch + 1] = job
        scored[#scored + 1] = 1700000000 + i
        scored[#scored + 1] = job
        if #batch == 1000 then
          redis.call('LPUSH', KEYS[1], unpack(batch)); redis.call('ZADD', KEYS[2], unpack(scored)); redis.call('ZADD', KEYS[3], unpack(scored))
          batch, scored = {}, {}
        end
      end
      if #batch > 0 then
        redis.call('LPUSH', KEYS[1], unpack(batch)); redis.call('ZADD', KEYS[2], unpack(scored)); redis.call('ZADD', KEYS[3], unpack(scored))
      end
      redis.call('SADD', KEYS[4], 'big')
      return 1
    LUA
  end

  # Ordered workers that other specs loaded into this process would be scraped too (their commands
  # depend on the run's order), so none are named: this measures the plain queues and sets.
  def scrape_cost
    JobQueue::Metrics.text(ordered: []) # warm: connection dialled
    text = nil
    cost = commands { text = JobQueue::Metrics.text(ordered: []) }
    [cost, text]
  end

  it "runs the same commands for 100,000 jobs as for 10" do
    fill(10)
    small, small_text = scrape_cost
    TestRedis.flush
    fill(100_000)
    big, big_text = scrape_cost

    expect(small_text).to include('queue_queue_size{queue="big"} 10')
    expect(big_text).to include('queue_queue_size{queue="big"} 100000', "queue_retry_size 100000", "queue_dead_size 100000")
    expect(big).to eq(small)
    expect(big.values.sum).to be <= 12
  end
end
