# frozen_string_literal: true

require_relative "../apps/basic"
require "queue/malloc_gc"

# A server runs a minor GC with an immediate sweep when Ruby malloc'd config.gc_malloc_growth bytes
# (4 MB by default) since its last GC, so the buffers of dead Strings are freed at once rather than in
# Ruby's next lazy sweep (lib/queue/malloc_gc.rb; ARCHITECTURE.md, "Memory").
RSpec.describe "the malloc-driven minor GC of a server" do
  let(:redis) { TestRedis.client }

  describe JobQueue::MallocGc do
    it "runs a minor GC once Ruby malloc'd its limit since the last one" do
      gc = described_class.new(1 << 20)
      GC.start
      (described_class::CHECK_EVERY - 1).times { gc.job_done }
      Array.new(128) { "x" * 16_384 } # 2 MB that nothing holds
      minor = GC.stat(:minor_gc_count)
      gc.job_done
      expect(gc.runs).to eq(1)
      expect(GC.stat(:minor_gc_count)).to eq(minor + 1)
      expect(GC.stat(:malloc_increase_bytes)).to be < (1 << 20)
    end

    it "runs none while Ruby mallocs less than its limit" do
      gc = described_class.new(64 << 20)
      (described_class::CHECK_EVERY * 4).times { gc.job_done }
      expect(gc.runs).to eq(0)
    end

    it "is one per process for a limit, and none when the limit is nil" do
      expect(described_class.for(3 << 20)).to be(described_class.for(3 << 20))
      expect(described_class.for(nil)).to be_nil
    end
  end

  # The GC counts the last of `jobs` jobs reported, each leaving `kb` KB of garbage.
  def runs_reported(env, jobs:, kb:)
    server = start_server(app: "malloc_gc.rb", args: ["-c", "2"], env: env)
    JobQueue::Client.push_bulk("class" => "GarbageWorker", "args" => Array.new(jobs) { [kb] })
    wait_until("#{jobs} jobs") { redis.llen("malloc_gc") == jobs }
    expect(server.stop.exitstatus).to eq(0)
    redis.lrange("malloc_gc", 0, -1).map(&:to_i).max
  end

  it "runs in a server whose jobs leave garbage in malloc, by default" do
    expect(runs_reported({}, jobs: 320, kb: 256)).to be > 0 # 80 MB of garbage, a GC per ~4 MB
  end

  it "is off when the setting is nil" do
    expect(runs_reported({"GC_GROWTH" => "off"}, jobs: 64, kb: 256)).to eq(-1)
  end
end
