# frozen_string_literal: true

require_relative "web_helper"

# Our dashboard over what Sidekiq 7.3 and 8.0 write (spec/fixtures/sidekiq8): an 8.0 job's integer
# millisecond times read as the 2025 they are, and 7.3/8.0 processes listed on the Busy page.
RSpec.describe "the dashboard over Sidekiq 7.3 and 8.0 data" do
  include Sidekiq8Fixtures

  let(:redis) { TestRedis.client }

  it "shows a Sidekiq 8 retry entry's created, enqueued, failed and retried times" do
    redis.zadd("retry", 1763985721.5, raw("retry_8_0.json"))

    html = page("/retries/1763985721.5-1d3b7d2e9a41f8b6c5d4e3f2")
    expect(html.scan(/datetime="([^"]+)"/).flatten).to eq(%w[
      2025-11-24T12:02:01Z 2025-11-24T12:01:00Z 2025-11-24T12:00:00Z 2025-11-24T12:00:01Z 2025-11-24T12:01:01Z
    ])
  end

  it "lists Sidekiq 7.3 and 8.0 processes on the Busy page, and in its JSON" do
    register_process(redis, raw("process_7_3.json"))
    register_process(redis, raw("process_8_0.json"))

    expect(page("/busy")).to include("app-1:4242", "app-2:4343", "critical, default")
    get "/api/v1/busy"
    rows = JSON.parse(last_response.body)["processes"].sort_by { |p| p["identity"] }
    expect(rows.map { |p| [p["identity"], p["version"], p["concurrency"]] }).to eq([
      ["app-1:4242:0123456789ab", "7.3.10", 5], ["app-2:4343:0123456789cd", "8.0.10", 5]
    ])
  end
end
