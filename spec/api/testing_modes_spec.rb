# frozen_string_literal: true

require "open3"
require "queue/testing"

# `require "queue/testing"` switched this process to fake mode; the rest of the suite expects the
# default (pushes to Redis), so every example here sets its mode with the block form.
JobQueue::Testing.disable!

module TestingModesSpec
  RUNS = []

  class Echo
    include JobQueue::Worker
    sidekiq_options queue: "echo"

    def perform(*args)
      RUNS << [self.class.name, jid, args]
    end
  end

  # Pushes an Echo job from inside its own job, as a chain of jobs would.
  class Chain
    include JobQueue::Worker

    def perform(depth)
      RUNS << ["Chain", jid, [depth]]
      Chain.perform_async(depth - 1) if depth > 1
      Echo.perform_async("from chain #{depth}")
    end
  end

  class Boom
    include JobQueue::Worker

    def perform(message)
      raise ArgumentError, message
    end
  end

  class ClientStamp
    def call(_worker_class, job, _queue, _redis_pool)
      return if job["args"] == ["drop"]

      job["stamp"] = "client"
      yield
    end
  end

  class ServerRecord
    def call(worker, job, queue)
      RUNS << [:server_middleware, worker.class.name, queue, job["stamp"]]
      yield
    end
  end
end

RSpec.describe JobQueue::Testing do
  let(:redis) { TestRedis.client }
  let(:runs) { TestingModesSpec::RUNS }
  let(:echo) { TestingModesSpec::Echo }
  let(:chain) { TestingModesSpec::Chain }

  before do
    runs.clear
    JobQueue::Worker.clear_all
  end

  after { JobQueue::Worker.clear_all }

  def with_middleware
    JobQueue.configure do |c|
      c.client_middleware { |chain| chain.add TestingModesSpec::ClientStamp }
      c.server_middleware { |chain| chain.add TestingModesSpec::ServerRecord }
    end
  end

  it "is disabled by default, and `require \"queue/testing\"` switches to fake mode" do
    script = "require 'queue'; require 'queue/testing/modes'; a = JobQueue::Testing.mode; " \
             "require 'queue/testing'; p [a, JobQueue::Testing.mode]"
    out, err, status = Open3.capture3(RbConfig.ruby, "-I", File.join(ServerProcess::ROOT, "lib"), "-e", script)
    expect([status.exitstatus, err]).to eq([0, ""])
    expect(out).to eq("[:disable, :fake]\n")
  end

  describe "block forms" do
    it "set the mode for the block and restore the previous one, also when the block raises" do
      described_class.fake! do
        expect([described_class.fake?, described_class.inline?, described_class.disabled?]).to eq([true, false, false])
        described_class.inline! { expect(described_class.mode).to eq(:inline) }
        expect(described_class.mode).to eq(:fake)
        expect { described_class.disable! { raise "boom" } }.to raise_error("boom")
        expect(described_class.fake?).to be(true)
      end
      expect(described_class.disabled?).to be(true)
    end

    it "set the mode for good without a block" do
      described_class.inline!
      expect(described_class.inline?).to be(true)
    ensure
      described_class.disable!
    end
  end

  describe "disabled" do
    it "pushes to Redis" do
      jid = described_class.disable! { echo.perform_async(1) }
      expect(queued_jobs("echo").map { |j| j["jid"] }).to eq([jid])
      expect(echo.jobs).to be_empty
      expect(runs).to be_empty
    end
  end

  describe "fake" do
    around { |example| described_class.fake! { example.run } }

    it "keeps jobs in memory per worker class, after a JSON round trip, and writes nothing to Redis" do
      hash = {"a" => [1, 2.5]}
      jid = echo.perform_async("x", hash)
      hash["a"] << "changed after the push"
      at = Time.now.to_f + 600
      later = echo.perform_at(at, 2)
      expect(redis.keys("*")).to be_empty
      expect(echo.jobs.map { |j| j["jid"] }).to eq([jid, later])
      expect(echo.jobs.first).to include("class" => "TestingModesSpec::Echo", "queue" => "echo", "args" => ["x", {"a" => [1, 2.5]}])
      expect(echo.jobs.first["enqueued_at"]).to be_a(Float)
      expect(echo.jobs.last["at"]).to be_within(0.001).of(at)
      expect(echo.jobs.last).not_to have_key("enqueued_at")
      expect(runs).to be_empty
    end

    it "hands out the live array, so a change matcher sees pushes" do
      expect { echo.perform_async(1) }.to change(echo.jobs, :size).by(1)
    end

    it "lists every worker's jobs on JobQueue::Worker.jobs; clear empties one worker, clear_all every one" do
      echo.perform_async(1)
      chain.set(queue: "echo").perform_async(1)
      JobQueue::Client.push_bulk("class" => echo, "args" => [[2], [3]])
      expect(JobQueue::Worker.jobs.map { |j| j["args"] }).to contain_exactly([1], [1], [2], [3])
      expect(JobQueue::Testing::FakeQueues["echo"].size).to eq(4)

      echo.clear
      expect(echo.jobs).to be_empty
      expect(JobQueue::Worker.jobs.map { |j| j["class"] }).to eq(["TestingModesSpec::Chain"])

      JobQueue::Worker.clear_all
      expect(JobQueue::Worker.jobs).to be_empty
    end

    it "runs one job with perform_one, and raises when there is none" do
      first = echo.perform_async(1)
      echo.perform_async(2)
      echo.perform_one
      expect(runs).to eq([["TestingModesSpec::Echo", first, [1]]])
      expect(echo.jobs.map { |j| j["args"] }).to eq([[2]])
      echo.perform_one
      expect { echo.perform_one }.to raise_error(JobQueue::Testing::EmptyQueueError, /no job queued/)
    end

    it "drains one worker's jobs, including those pushed while draining, and leaves the others" do
      chain.perform_async(3)
      chain.drain
      expect(runs.map { |r| r.values_at(0, 2) }).to eq([["Chain", [3]], ["Chain", [2]], ["Chain", [1]]])
      expect(chain.jobs).to be_empty
      expect(echo.jobs.map { |j| j["args"] }).to eq([["from chain 3"], ["from chain 2"], ["from chain 1"]])
    end

    it "drains every worker with drain_all" do
      chain.perform_async(2)
      JobQueue::Worker.drain_all
      expect(JobQueue::Worker.jobs).to be_empty
      expect(runs.map(&:first)).to contain_exactly("Chain", "Chain", "TestingModesSpec::Echo", "TestingModesSpec::Echo")
    end

    it "runs client middleware at push time and server middleware when the job runs" do
      with_middleware
      echo.perform_async("drop")
      echo.perform_async("keep")
      expect(echo.jobs.map { |j| [j["args"], j["stamp"]] }).to eq([[["keep"], "client"]])
      expect(runs).to be_empty
      echo.drain
      expect(runs.map(&:first)).to eq([:server_middleware, "TestingModesSpec::Echo"])
      expect(runs.first).to eq([:server_middleware, "TestingModesSpec::Echo", "echo", "client"])
    end

    it "lets a job's exception reach the caller" do
      TestingModesSpec::Boom.perform_async("bad")
      expect { TestingModesSpec::Boom.drain }.to raise_error(ArgumentError, "bad")
      expect(TestingModesSpec::Boom.jobs).to be_empty
    end
  end

  describe "inline" do
    around { |example| described_class.inline! { example.run } }

    it "runs the job at push time on a JSON copy of its arguments, writing nothing to Redis" do
      hash = {"a" => [1, 2.5]}
      jid = echo.perform_async(hash, nil)
      expect(jid).to match(/\A\h{24}\z/)
      expect(runs).to eq([["TestingModesSpec::Echo", jid, [{"a" => [1, 2.5]}, nil]]])
      expect(runs.first.last.first).not_to be(hash)
      expect(redis.keys("*")).to be_empty
      expect(echo.jobs).to be_empty
    end

    it "runs scheduled and bulk jobs at once too" do
      echo.perform_in(3600, 1)
      JobQueue::Client.push_bulk("class" => echo, "args" => [[2], [3]])
      expect(runs.map(&:last)).to eq([[1], [2], [3]])
    end

    it "runs jobs pushed by a running job" do
      chain.perform_async(2)
      expect(runs.map { |r| r.values_at(0, 2) }).to eq(
        [["Chain", [2]], ["Chain", [1]], ["TestingModesSpec::Echo", ["from chain 1"]], ["TestingModesSpec::Echo", ["from chain 2"]]]
      )
    end

    it "runs client and server middleware" do
      with_middleware
      expect(echo.perform_async("drop")).to be_nil
      echo.perform_async("keep")
      expect(runs).to eq([[:server_middleware, "TestingModesSpec::Echo", "echo", "client"], ["TestingModesSpec::Echo", runs.last[1], ["keep"]]])
    end

    it "raises the job's exception at the push" do
      expect { TestingModesSpec::Boom.perform_async("inline failure") }.to raise_error(ArgumentError, "inline failure")
    end
  end
end
