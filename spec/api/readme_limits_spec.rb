# frozen_string_literal: true

require_relative "../support/readme"

# README "Concurrency limits" and "Rate limits": their declarations run as written.
RSpec.describe "README limits examples" do
  # The app's own feature flags, which the README's lambda limit reads.
  module Feature
    def self.enabled?(_name) = true
  end

  it "declares the concurrency limits and reads them back" do
    block = Readme.blocks("## Concurrency limits", count: 1).first
    block.run
    expect(ExportWorker.get_concurrency_limit).to eq(5)
    expect(ReindexWorker.get_concurrency_limit).to eq(10)
    expect(JobQueue::Limits.key_for("SyncAccountWorker", SyncAccountWorker.queue_limits.concurrency.key, [42, "x"])).to eq("SyncAccountWorker[42]")
  end

  it "declares the rate limits" do
    Readme.blocks("## Rate limits", count: 1).first.run
    expect(PartnerApiWorker.queue_limits.rate.to_a).to eq([100, 60.0, :window, nil])
    expect(WebhookWorker.queue_limits.rate.kind).to eq(:bucket)
  end
end
