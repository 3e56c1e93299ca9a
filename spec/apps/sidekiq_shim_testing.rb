# frozen_string_literal: true

# An app's spec file written for Sidekiq::Testing, run unchanged on queue/compat/sidekiq (by
# spec/compat/sidekiq_shim_spec.rb, in its own rspec process). Not named *_spec.rb: the suite's own
# process has the real sidekiq gem loaded and must not load it.
require "queue/compat/sidekiq"
require "sidekiq/testing"

class TestingShimWorker
  include Sidekiq::Worker
  sidekiq_options queue: "mail"

  def perform(address, count)
    Sidekiq.logger.debug("mailing #{address}")
    TestingShimWorker.sent << [address, count]
    TestingShimWorker.perform_async("#{address}.again", count - 1) if count > 1
  end

  def self.sent
    @sent ||= []
  end
end

class SkipMiddleware
  def call(_worker, job, _queue)
    TestingShimWorker.sent << [:middleware, job["args"].first]
    yield
  end
end

RSpec.describe TestingShimWorker do
  before do
    Sidekiq::Worker.clear_all
    TestingShimWorker.sent.clear
  end

  it "is in fake mode after require \"sidekiq/testing\"" do
    expect(Sidekiq::Testing).to be_fake
    expect { TestingShimWorker.perform_async("a@example.com", 1) }.to change(TestingShimWorker.jobs, :size).by(1)
    expect(TestingShimWorker.jobs.first).to include("class" => "TestingShimWorker", "args" => ["a@example.com", 1], "queue" => "mail")
    expect(Sidekiq::Queues["mail"].size).to eq(1)
    expect(TestingShimWorker.queue).to eq("mail")
  end

  it "drains a worker, with the jobs its jobs push" do
    TestingShimWorker.perform_async("b@example.com", 2)
    TestingShimWorker.drain
    expect(TestingShimWorker.sent).to eq([["b@example.com", 2], ["b@example.com.again", 1]])
    expect(TestingShimWorker.jobs).to be_empty
  end

  it "drains every worker with Sidekiq::Worker.drain_all and empties with clear_all" do
    TestingShimWorker.perform_async("c@example.com", 1)
    expect(Sidekiq::Worker.jobs.size).to eq(1)
    Sidekiq::Worker.drain_all
    expect(TestingShimWorker.sent).to eq([["c@example.com", 1]])
    TestingShimWorker.perform_in(60, "d@example.com", 1)
    Sidekiq::Worker.clear_all
    expect(Sidekiq::Worker.jobs).to be_empty
  end

  it "runs jobs at once inside Sidekiq::Testing.inline! and returns to fake mode after the block" do
    Sidekiq::Testing.inline! { TestingShimWorker.perform_async("e@example.com", 1) }
    expect(TestingShimWorker.sent).to eq([["e@example.com", 1]])
    expect(Sidekiq::Testing).to be_fake
  end

  it "switches modes with inline! and disable! too" do
    Sidekiq::Testing.inline!
    TestingShimWorker.perform_async("f@example.com", 1)
    expect(TestingShimWorker.sent).to eq([["f@example.com", 1]])
    Sidekiq::Testing.disable!
    expect(Sidekiq::Testing).to be_disabled
  ensure
    Sidekiq::Testing.fake!
  end

  it "runs Sidekiq::Testing.server_middleware around drained jobs" do
    Sidekiq::Testing.server_middleware { |chain| chain.add SkipMiddleware }
    TestingShimWorker.perform_async("g@example.com", 1)
    TestingShimWorker.drain
    expect(TestingShimWorker.sent).to eq([[:middleware, "g@example.com"], ["g@example.com", 1]])
  ensure
    Sidekiq::Testing.server_middleware { |chain| chain.remove SkipMiddleware }
  end

  it "raises Sidekiq::EmptyQueueError from perform_one with nothing queued" do
    expect { TestingShimWorker.perform_one }.to raise_error(Sidekiq::EmptyQueueError)
  end
end
