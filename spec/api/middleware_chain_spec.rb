# frozen_string_literal: true

module ApiSpec
  # Middleware that append their name (and constructor argument) to job["trail"].
  ChainLink = Struct.new(:label) do
    def call(_worker_class, job, _queue, _redis_pool)
      (job["trail"] ||= []) << [self.class.name.split("::").last, label].compact.join(":")
      yield
    end
  end
  ChainLink::First = Class.new(ChainLink)
  ChainLink::Second = Class.new(ChainLink)
  ChainLink::Third = Class.new(ChainLink)
end

RSpec.describe JobQueue::Middleware::Chain do
  first = ApiSpec::ChainLink::First
  second = ApiSpec::ChainLink::Second
  third = ApiSpec::ChainLink::Third
  absent = ApiSpec::ChainLink

  subject(:chain) { described_class.new }

  def run(chain)
    job = {}
    result = chain.invoke("Worker", job, "default", nil) { :performed }
    [result, job["trail"]]
  end

  it "adds to the end, instantiating each entry per call with its arguments" do
    chain.add(first, "a")
    chain.add(second)
    expect(run(chain)).to eq([:performed, ["First:a", "Second"]])
  end

  it "prepends to the front" do
    chain.add(first)
    chain.prepend(second)
    expect(chain.to_a).to eq([second, first])
  end

  it "moves an entry added twice, keeping one" do
    chain.add(first)
    chain.add(second)
    chain.add(first, "again")
    expect(run(chain).last).to eq(["Second", "First:again"])
  end

  it "removes an entry" do
    chain.add(first)
    chain.add(second)
    chain.remove(first)
    expect(chain.to_a).to eq([second])
    expect(chain.exists?(first)).to be(false)
    expect(chain.exists?(second)).to be(true)
  end

  it "inserts before and after an entry" do
    chain.add(first)
    chain.add(third)
    chain.insert_before(third, second)
    expect(chain.to_a).to eq([first, second, third])

    chain.insert_after(third, first)
    expect(chain.to_a).to eq([second, third, first])
  end

  it "inserts at the front (before) or the end (after) when the anchor is absent" do
    chain.add(first)
    chain.insert_before(absent, second)
    chain.insert_after(absent, third)
    expect(chain.to_a).to eq([second, first, third])
  end

  it "yields straight through when empty" do
    expect(chain).to be_empty
    expect(run(chain)).to eq([:performed, nil])
  end

  it "returns nil when an entry does not yield" do
    stopper = Class.new { def call(*) = nil }
    chain.add(first)
    chain.add(stopper)
    chain.add(second)
    expect(run(chain)).to eq([nil, ["First"]])
  end

  it "is configured through JobQueue.configure for the client and the server separately" do
    JobQueue.configure do |config|
      config.client_middleware { |c| c.add(first) }
      config.server_middleware { |c| c.add(second) }
    end
    expect(JobQueue.config.client_middleware.to_a).to eq([first])
    expect(JobQueue.config.server_middleware.to_a).to eq([second])
  end
end
