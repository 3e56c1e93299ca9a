# frozen_string_literal: true

require_relative "web_helper"

# What each page costs Redis, counted by Redis itself (INFO commandstats counts every command, a
# script's included): the same commands, as many of each, with 50,000 jobs in a queue and 20,000 in
# the retry set as with 30 of each. No page reads a whole queue or set. (bench/web.rb times the pages
# at 1,000,000 and 100,000.)
RSpec.describe "JobQueue::Web's cost per page" do
  def commandstats
    TestRedis.client.info("commandstats").to_h { |name, fields| [name, fields["calls"].to_i] }
  end

  # Commands (name => calls) Redis ran while the page was served.
  def commands_of(path)
    before = commandstats
    get path
    expect([path, last_response.status]).to eq([path, 200])
    after = commandstats
    after.to_h { |name, calls| [name, calls - before.fetch(name, 0)] }.reject { |name, calls| name == "info" || calls.zero? }
  end

  def fill(count)
    TestRedis.client.eval(<<~LUA, keys: ["queue:big", "retry", "queues"], argv: [count[:queued], count[:retrying]])
      local function job(i) return '{"class":"' .. (i % 100 == 0 and 'Rare' or 'Common') .. '","args":[' .. i .. '],"jid":"' .. string.format('%024x', i) .. '","queue":"big","enqueued_at":1700000000.5,"retry_count":0,"error_class":"E","error_message":"m"}' end
      for i = 1, tonumber(ARGV[1]) do redis.call('LPUSH', KEYS[1], job(i)) end
      for i = 1, tonumber(ARGV[2]) do redis.call('ZADD', KEYS[2], 1700000000 + i, job(i)) end
      redis.call('SADD', KEYS[3], 'big')
      return 1
    LUA
  end

  # Every page, at its start and deep inside; "deep" is a fraction of the set, so it moves with size.
  def pages(count)
    json, score = TestRedis.client.zrange("retry", count[:retrying] / 2, count[:retrying] / 2, with_scores: true).first
    {
      "/" => "/", "/queues" => "/queues", "/queues/big" => "/queues/big",
      "/queues/big deep" => "/queues/big?page=#{count[:queued] / 50}",
      "/retries" => "/retries", "/retries deep" => "/retries?page=#{count[:retrying] / 50}",
      "/retries?q=Rare" => "/retries?q=Rare", "/retries/KEY" => "/retries/#{score}-#{JSON.parse(json)["jid"]}",
      "/scheduled" => "/scheduled", "/dead" => "/dead", "/busy" => "/busy", "/ordered" => "/ordered",
      "/api/v1/ordered" => "/api/v1/ordered",
      "/api/v1/stats" => "/api/v1/stats", "/api/v1/dashboard" => "/api/v1/dashboard",
      "/api/v1/retries" => "/api/v1/retries?page=2"
    }
  end

  def costs(count)
    TestRedis.flush
    fill(count)
    pages(count).each_value { |path| get path } # scripts loaded, sessions made
    pages(count).transform_values { |path| commands_of(path) }
  end

  # `count` idempotency keys held (as the engine writes them: a jid, a TTL), among as many other keys.
  def hold_keys(count)
    TestRedis.client.eval(<<~LUA, argv: [count])
      for i = 1, tonumber(ARGV[1]) do
        redis.call('SET', 'duplicate:default:' .. string.format('%064x', i), string.format('%024x', i), 'EX', 3600)
        redis.call('SET', 'other:' .. i, i)
      end
      return 1
    LUA
  end

  def dedup_costs(held)
    TestRedis.flush
    hold_keys(held)
    get "/api/v1/dedup?count=100"
    cursor = JSON.parse(last_response.body)["next_cursor"]
    paths = {"/dedup" => "/dedup", "/dedup next" => "/dedup?count=100&cursor=#{cursor}",
             "/api/v1/dedup next" => "/api/v1/dedup?count=100&cursor=#{cursor}"}
    paths.each_value { |path| get path }
    paths.transform_values { |path| commands_of(path) }
  end

  it "scans one bounded step per dedup page: one SCAN, and a GET and PTTL per key found, however many are held" do
    small = dedup_costs(30)
    big = dedup_costs(50_000)
    big.each do |path, commands|
      expect([path, commands["scan"]]).to eq([path, 1])
      # SCAN's COUNT is a hint: a step can return a little more than COUNT keys, never a number that
      # grows with the keyspace.
      expect([path, commands["get"]]).to match([path, be_between(1, 150)])
      expect(commands["pttl"]).to eq(commands["get"])
      expect([path, commands.except("get", "pttl")]).to eq([path, small[path].except("get", "pttl")])
    end
    expect(small.values.map { |c| c["get"] }).to all(be <= 30)
  end

  it "runs the same Redis commands per page with 50,000 queued and 20,000 retrying jobs as with 30" do
    small = costs(queued: 30, retrying: 30)
    big = costs(queued: 50_000, retrying: 20_000)
    expect(big.keys).to eq(small.keys)
    big.each { |page, commands| expect([page, commands]).to eq([page, small[page]]) }
    expect(small.values).to all(satisfy { |commands| commands.values.sum < 60 })
  end
end
