# frozen_string_literal: true

require "rack/test"
require "queue/metrics"
require "queue/api"
require_relative "../apps/expiry"

# Expiring jobs (`expires_in`, Sidekiq Pro's option): the client writes an absolute `expires_at`, and
# a real server drops a job that could not start before it, acknowledged, logged and counted.
RSpec.describe "expiring jobs" do
  include Rack::Test::Methods

  def app = JobQueue::Metrics

  def queued(queue) = TestRedis.client.lrange("queue:#{queue}", 0, -1).map { |raw| JSON.parse(raw) }

  it "turns the worker's expires_in into expires_at, counted from the push" do
    before = Time.now.to_f
    ExpiringWorker.perform_async("a")
    job = queued("expiring").first
    expect(job).not_to have_key("expires_in")
    expect(job["expires_at"]).to be_within(1e-6).of(job["created_at"] + 60)
    expect(job["expires_at"]).to be >= before + 60
  end

  it "counts a scheduled job's expiry from when it is to run, per job in bulk too" do
    at = Time.now.to_f + 300
    ExpiringWorker.set(expires_in: 30).perform_at(at, "later")
    job = JSON.parse(TestRedis.client.zrange("schedule", 0, -1).first)
    expect(job["expires_at"]).to be_within(1e-6).of(at + 30)

    ats = [at + 10, at + 20]
    jids = JobQueue::Client.push_bulk("class" => ExpiringWorker, "args" => [["x"], ["y"]], "at" => ats)
    scheduled = TestRedis.client.zrange("schedule", 0, -1).map { |raw| JSON.parse(raw) }.to_h { |j| [j["jid"], j] }
    expect(jids.map { |jid| scheduled.fetch(jid)["expires_at"] }).to eq(ats.map { |t| t + 60 })
  end

  it "refuses an expires_in that is not a positive number of seconds, where it is given" do
    expect { Class.new { include JobQueue::Worker }.sidekiq_options(expires_in: -5) }
      .to raise_error(ArgumentError, /invalid sidekiq_options expires_in: -5/)
    expect { ExpiringWorker.set(expires_in: "1 hour") }.to raise_error(ArgumentError, /invalid option expires_in: "1 hour"/)
  end

  it "never runs a job that could not start before it expired, and counts it" do
    fresh = ExpiringWorker.perform_async("fresh")
    stale = ExpiringWorker.set(expires_in: 0.05).perform_async("stale")
    stale_job = queued("expiring").find { |j| j["jid"] == stale }
    wait = stale_job.fetch("expires_at") - Time.now.to_f
    sleep(wait + 0.01) if wait.positive? # the event awaited is the clock passing expires_at

    server = start_server(app: "expiry.rb", args: ["-c", "2", "-q", "expiring"])
    wait_until("the fresh job to run") { TestRedis.client.lrange("ran:expiring", 0, -1) == ["fresh"] }
    stats = wait_until("the expired job to be counted (with the next liveness beat)") do
      s = JobQueue::Stats.new
      s if s.expired == 1
    end
    expect(stats.enqueued).to eq(0)
    lists = TestRedis.client.keys("jq:working:*").select { |k| TestRedis.client.type(k) == "list" }
    expect(lists.sum { |k| TestRedis.client.llen(k) }).to eq(0) # acknowledged, not left to recovery

    get "/"
    expect(last_response.body).to include(%(queue_jobs_expired_total{class="ExpiringWorker",queue="expiring"} 1))
    expect(last_response.body).to include(%(queue_jobs_processed_total{class="ExpiringWorker",queue="expiring"} 1))

    expect(server.stop).to be_success
    expect(TestRedis.client.lrange("ran:expiring", 0, -1)).to eq(["fresh"])
    expect(server.output).to match(/jid=#{stale}\b.*INFO: expired$/)
    expect(server.output).to match(/jid=#{fresh}\b.*INFO: done$/)
  end
end
