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
