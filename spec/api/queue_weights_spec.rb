# frozen_string_literal: true

require_relative "../apps/api_queues"

# Which queue a real server takes its jobs from, with and without weights (Sidekiq 6.4's rule: no
# weights means strict order; any weight means a random order per fetch, weighted).
RSpec.describe "exe/queue serving several queues" do
  let(:redis) { TestRedis.client }

  let(:each_queue) { 2000 }
  # Fewer runs than either queue holds (less what two threads can hold unstarted), so both queues
  # still had jobs when each of these ran.
  let(:first) { 1000 }

  # Fills queues a and b with `each_queue` jobs apiece, runs a server with `queue_args`, and returns
  # b's share of the first `first` jobs it ran.
  def share_of_b(*queue_args)
    %w[a b].each { |queue| QueueOrderWorker.set(queue: queue).perform_bulk([[queue]] * each_queue) }
    server = start_server(app: "api_queues.rb", args: ["-c", "2", *queue_args])
    wait_until("#{first} jobs to run") { redis.llen("ran:queues") >= first }
    expect(server.stop.exitstatus).to eq(0)
    ran = redis.lrange("ran:queues", 0, first - 1)
    expect(ran.uniq - %w[a b]).to be_empty
    ran.count("b").fdiv(first)
  end

  it "serves -q a,1 -q b,1 about evenly while both have jobs" do
    expect(share_of_b("-q", "a,1", "-q", "b,1")).to be_between(0.3, 0.7)
  end

  it "serves -q a,3 -q b about 3 to 1" do
    expect(share_of_b("-q", "a,3", "-q", "b")).to be_between(0.1, 0.4)
  end

  it "serves -q a -q b in strict order: nothing from b while a has jobs" do
    expect(share_of_b("-q", "a", "-q", "b")).to eq(0)
  end
end
