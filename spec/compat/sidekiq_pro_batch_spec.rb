# frozen_string_literal: true

require_relative "shim_helper"

# A Sidekiq Pro app's batches (Pro's documented API) run unchanged under queue/compat/sidekiq:
# Sidekiq::Batch and Sidekiq::Batch::Status are JobQueue's.
RSpec.describe "queue/compat/sidekiq: Sidekiq Pro batches", :shim do
  let(:redis) { TestRedis.client }

  it "creates the batch in a client, runs it on our server, and fires the callbacks" do
    out = run_ruby(<<~RUBY, requires: [app_path("sidekiq_pro_batch_app.rb")])
      bid = start_import
      status = Sidekiq::Batch::Status.new(bid)
      puts [bid, status.total, status.pending, status.description, Sidekiq::Batch.equal?(JobQueue::Batch)].join(",")
    RUBY
    bid, total, pending, description, aliased = out.strip.split(",")
    expect([total, pending, description, aliased]).to eq(%w[3 3 Import\ rows true])

    server = ServerProcess.new(app: "sidekiq_pro_batch_app.rb", args: ["-q", "import"]).start
    wait_until("both callbacks") { redis.llen("pro_callbacks") == 2 }
    expect(redis.lrange("pro_callbacks", 0, -1)).to eq(["complete 4 ops@example.com", "success 0 0 ops@example.com"])
    expect(redis.lrange("rows", 0, -1)).to match_array(["1:#{bid}", "2:#{bid}", "3:#{bid}", "100:#{bid}"])
    expect(server.stop.exitstatus).to eq(0)
  ensure
    server&.ensure_stopped
  end
end
