# frozen_string_literal: true

require_relative "web_helper"
require_relative "../apps/limits"

# The Limits page: running / limit / deferred per worker, from what a real server deferred.
RSpec.describe "JobQueue::Web limits page" do
  let(:redis) { TestRedis.client }

  it "shows each limited worker's running, limit and deferred jobs" do
    expect(page("/limits")).to include("No worker with a concurrency limit has run a job yet.")
    redis.set("limits:gate", "0")
    server = ServerProcess.new(app: "limits.rb", args: ["-c", "2", "-q", "gated"]).start
    GatedWorker.perform_bulk([[1], [2], [3]])
    wait_until("the jobs to be deferred") { redis.hget("jq:limits:deferred", "GatedWorker").to_i == 3 }
    html = page("/limits")
    row = html[%r{<td data-label="Worker">GatedWorker</td>(.*?)</tr>}m, 1]
    expect(row.scan(%r{<td class="num" data-label="(\w+)">([^<]*)</td>})).to eq([%w[Running 0], %w[Limit 0], %w[Deferred 3]])
    expect(html).to include('href="/limits" class="on"')
    expect(server.stop.exitstatus).to eq(0)
  ensure
    server&.ensure_stopped
  end
end
