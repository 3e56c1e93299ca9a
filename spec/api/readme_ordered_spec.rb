# frozen_string_literal: true

# The README's "Ordered workers" examples, run as written (in order), against the test Redis.
RSpec.describe "README: Ordered workers" do
  let(:blocks) { Readme.blocks("## Ordered workers", count: 5) }

  after do
    %i[ATestWorker ATestMigrationWorker].each do |name|
      next unless Object.const_defined?(name, false)

      JobQueue::OrderedWorker.forget(Object.const_get(name))
      Object.send(:remove_const, name)
    end
  end

  it "runs them: declarations, pushes, server settings, the dashboard API and the shard-count migration" do
    blocks.each(&:run)
    redis = TestRedis.client
    expect(redis.zcard("lowkiq:A:v1:ATestWorker:all_ids_lex")).to eq(1000)
    expect(redis.zrange("lowkiq:A:v1:ATestWorker:payloads:1", 0, -1)).to eq(['{"attr":"v1"}', '{"id":1}'].sort)
    expect([ATestWorker.shards_count, ATestWorker.queue_name]).to eq([10, "ATestWorker_V2"])
    expect([ATestMigrationWorker.shards_count, ATestMigrationWorker.queue_name]).to eq([5, "ATestWorker"])
  end
end
