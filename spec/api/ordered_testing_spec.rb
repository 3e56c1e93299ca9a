# frozen_string_literal: true

require "queue/testing"
require "queue/rspec"

# `require "queue/testing"` switched this process to fake mode; the rest of the suite expects the
# default (pushes to Redis), so every example here sets its mode with the block form.
JobQueue::Testing.disable!

# The fake and inline modes of ordered workers (lib/queue/testing/ordered.rb) and the shared example
# "an ordered worker" (lib/queue/rspec.rb).
module OrderedTestingSpec
  CALLS = []

  module Sync
    extend JobQueue::OrderedWorker
    self.batch_size = 2

    def self.perform(payloads_by_id)
      CALLS << payloads_by_id
      Sync.perform_async([{id: "next", payload: "from perform"}]) if payloads_by_id.key?("chain")
    end
  end
  # Not one of the loaded workers other specs' servers and stats see.
  JobQueue::OrderedWorker.forget(Sync)
end

RSpec.describe "ordered workers in the test modes" do
  let(:worker) { OrderedTestingSpec::Sync }
  let(:calls) { OrderedTestingSpec::CALLS }
  let(:jobs) do
    [
      {id: 1, payload: {"n" => 2}, score: 20},
      {id: 2, payload: "x", perform_in: 5},
      {id: 1, payload: {n: 1}, score: 10},
      {id: 1, payload: {"n" => 2}, score: 15}, # identical payload: once, at the lower score
      {id: 3, payload: "y", perform_in: 1}
    ]
  end

  before do
    calls.clear
    JobQueue::Worker.clear_all
  end

  after { JobQueue.config.ordered_server_middlewares.clear }

  it "keeps jobs in fake mode, as perform will get them, until drained: merged, oldest first, batch_size ids a call" do
    JobQueue::Testing.fake! do
      expect(worker.perform_async(jobs)).to eq(3)
      expect(worker.perform_async([{id: 1}, {id: 4}])).to eq(1) # id 1 is held already
      expect(worker.jobs.first).to eq(id: "1", payload: {"n" => 2}, score: 20.0, perform_in: worker.jobs.first[:perform_in])
      expect(worker.jobs.size).to eq(7)
      expect(calls).to be_empty

      worker.drain
    end
    # Due order: 3 (perform_in 1), 2 (5), then 1 and 4 (now), in the order they were pushed.
    expect(calls).to eq([
      {"3" => ["y"], "2" => ["x"]},
      {"1" => [{"n" => 1}, {"n" => 2}, ""], "4" => [""]}
    ])
    expect(worker.jobs).to be_empty
  end

  it "drains the jobs perform pushes, and clear_all and clear drop them" do
    JobQueue::Testing.fake! do
      worker.perform_async([{id: "chain"}])
      worker.drain
      expect(calls).to eq([{"chain" => [""]}, {"next" => ["from perform"]}])

      worker.perform_async([{id: 1}])
      JobQueue::Worker.clear_all
      expect(worker.jobs).to be_empty
      worker.perform_async([{id: 1}])
      worker.clear
      expect(worker.jobs).to be_empty
    end
  end

  it "runs at once in inline mode, inside the ordered server middlewares, and validates as for Redis" do
    JobQueue.config.ordered_server_middlewares << ->(w, batch, &block) { calls << [:around, w, batch.keys] && block.call }
    JobQueue::Testing.inline! do
      expect(worker.perform_async([{id: 9, payload: "a"}, {id: 9, payload: "b", score: 0}])).to eq(1)
      expect { worker.perform_async([{payload: "no id"}]) }.to raise_error(ArgumentError, /job 0 has no id/)
    end
    expect(calls).to eq([[:around, worker, ["9"]], {"9" => %w[b a]}])
  end

  it "goes to Redis when the test modes are disabled" do
    expect(worker.perform_async([{id: 5, payload: "r"}])).to eq(1)
    expect(JobQueue::Ordered.stats([worker])["total"]["length"]).to eq(1)
    expect(calls).to be_empty
  end

  describe "the shared example" do
    describe OrderedTestingSpec::Sync do
      let(:ordered_jobs) { [{id: 1, payload: "p"}] }

      it_behaves_like "an ordered worker" do
        it "performs through the helper" do
          perform_ordered
          expect(OrderedTestingSpec::CALLS.last).to eq("1" => ["p"])
        end
      end
    end
  end
end
