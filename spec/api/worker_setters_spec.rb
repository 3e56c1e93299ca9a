# frozen_string_literal: true

require "queue/api"
require "queue/processor"
require_relative "../apps/worker_setters"

# A worker's jid and bid, as the engine gives them to the jobs it runs itself: JobQueue::Worker's
# own accessors have their instance variables set directly, a class's own setters are called.
RSpec.describe "a worker's jid and bid setters" do
  let(:redis) { TestRedis.client }

  def seen = redis.lrange("seen", 0, -1).map { |j| JSON.parse(j) }.sort

  it "are answered once per class: the stock accessor, a class's own, or none" do
    setter = JobQueue::Processor::ClassInfo.method(:setter)
    expect(setter.(StockSettersJob, :jid=)).to eq(:ivar)
    expect(setter.(StockSettersJob, :bid=)).to eq(:ivar)
    expect(setter.(OwnSettersJob, :jid=)).to be(true)
    expect(setter.(OwnSettersJob, :bid=)).to be(true)
    expect(setter.(Class.new { def perform = nil }, :jid=)).to be(false)
  end

  it "give every job its jid and its batch's bid, through a class's own setters where it has them" do
    stock = StockSettersJob.perform_async("stock")
    own = OwnSettersJob.perform_async("own")
    batch = JobQueue::Batch.new
    in_batch = []
    batch.jobs { in_batch.push(StockSettersJob.perform_async("stock-b"), OwnSettersJob.perform_async("own-b")) }
    start_server(app: "worker_setters.rb", args: ["-c", "2"])
    wait_until("every job") { redis.llen("seen") == 4 }
    expect(seen).to eq([
      ["own", "own-#{own}", nil, nil],
      ["own-b", "own-#{in_batch[1]}", batch.bid, 1],
      ["stock", stock, nil, stock],
      ["stock-b", in_batch[0], batch.bid, in_batch[0]]
    ])
  end
end

# The worker itself: allocated by the engine when `new` would do nothing more, else made by `new`.
RSpec.describe "a worker made for a job" do
  let(:redis) { TestRedis.client }

  it "is allocated only where new and initialize are the stock ones" do
    plain_new = JobQueue::Processor::ClassInfo.method(:plain_new?)
    expect(plain_new.(PlainJob)).to be(true)
    expect(plain_new.(InitializeJob)).to be(false)
    expect(plain_new.(CustomNewJob)).to be(false)
    expect(plain_new.(Module.new)).to be(false)
  end

  it "runs a class's own initialize and new, and an allocated one has only what new would give it" do
    jids = %w[init new plain].zip([InitializeJob, CustomNewJob, PlainJob]).to_h { |label, klass| [label, klass.perform_async(label)] }
    start_server(app: "worker_setters.rb", args: ["-c", "1"])
    wait_until("every job") { redis.llen("made") == 3 }
    made = redis.lrange("made", 0, -1).map { |j| JSON.parse(j) }.sort
    expect(made).to eq([
      ["init", "initialize", jids["init"]],
      ["new", "new", jids["new"]],
      ["plain", %w[@_context @jid], jids["plain"]]
    ])
  end
end
