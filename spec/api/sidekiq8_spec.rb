# frozen_string_literal: true

require "rack/test"
require "queue/api"
require "queue/metrics"
require_relative "../apps/api_retry"

# Sidekiq 8 writes a job's created_at, enqueued_at, failed_at and retried_at as integer epoch
# milliseconds (6.4–7.x: float seconds), and 7.x/8.x add version, weights, embedded and capsules to
# a process's info. Fixtures in those exact formats (spec/fixtures/sidekiq8), against a real Redis
# and our real server process.
RSpec.describe "Sidekiq 7.3 and 8.0 formats" do
  include Sidekiq8Fixtures

  let(:redis) { TestRedis.client }

  def wait_for_failure(jid, count: 1)
    wait_until("failure #{count} of #{jid} to be handled") { recorded("api:errors").count { |e| e["jid"] == jid } >= count }
  end

  describe "the inspection API over Sidekiq 8 entries" do
    it "reads a queued 8.0 job's millisecond times, and a 7.3 job's float seconds, as the same Times" do
      sent = now_ms - 5000
      redis.lpush("queue:sk8", JSON.generate(job("job_8_0.json").merge("enqueued_at" => sent)))
      redis.lpush("queue:sk7", raw("job_7_3.json"))

      job8 = JobQueue::Queue.new("sk8").first
      expect(job8.created_at).to eq(Time.utc(2025, 11, 24, 12, 0, 0.123r))
      expect(job8.enqueued_at).to eq(time_of_ms(sent))
      expect(job8.latency).to be_within(1).of(5)
      job7 = JobQueue::Queue.new("sk7").first
      expect(job7.created_at).to eq(Time.at(1763985600.123456).utc)
      expect(job7.enqueued_at).to eq(Time.at(1763985600.456789).utc)
      # The engine's latency (Queue#latency, Stats, the metrics scrape) reads the same way.
      expect(JobQueue::Queue.new("sk8").latency).to be_within(1).of(5)
    end

    it "gives an 8.0 job's latency in seconds to Stats and /metrics" do
      redis.sadd?("queues", "default")
      redis.lpush("queue:default", JSON.generate(job("job_8_0.json").merge("enqueued_at" => now_ms - 7000)))

      expect(JobQueue::Stats.new.default_queue_latency).to be_within(1).of(7)
      response = Rack::MockRequest.new(JobQueue::Metrics).get("/")
      expect(response.status).to eq(200)
      expect(response.body[/^queue_queue_latency_seconds\{queue="default"\} (\S+)$/, 1].to_f).to be_within(1).of(7)
    end

    it "shows retry and dead entries' failed_at, retried_at and created_at, not in the year 58871" do
      redis.zadd("retry", 1763985721.5, raw("retry_8_0.json"))
      redis.zadd("dead", 1763985631.75, raw("dead_8_0.json"))

      entry = JobQueue::RetrySet.new.first
      expect(entry.created_at).to eq(Time.utc(2025, 11, 24, 12, 0, 0.123r))
      expect(entry.failed_at).to eq(Time.utc(2025, 11, 24, 12, 0, 1.25r))
      expect(entry.retried_at).to eq(Time.utc(2025, 11, 24, 12, 1, 1.5r))
      expect(entry.enqueued_at).to eq(Time.utc(2025, 11, 24, 12, 1, 0.789r))
      expect(entry.at).to eq(Time.at(1763985721.5).utc)
      dead = JobQueue::DeadSet.new.first
      expect([dead.created_at.year, dead.failed_at, dead.retried_at]).to eq([2025, Time.utc(2025, 11, 24, 12, 0, 1.25r), Time.utc(2025, 11, 24, 12, 0, 31.75r)])
    end

    it "queues a retry entry again with enqueued_at in milliseconds, as Sidekiq 8 wrote it" do
      redis.zadd("retry", 1763985721.5, raw("retry_8_0.json"))
      before = now_ms
      JobQueue::RetrySet.new.first.add_to_queue
      after = now_ms

      queued = JSON.parse(redis.lindex("queue:default", 0))
      expect(queued["enqueued_at"]).to be_an(Integer).and be_between(before, after)
      expect(queued.slice("created_at", "failed_at", "retried_at")).to eq(job("retry_8_0.json").slice("created_at", "failed_at", "retried_at"))
    end
  end

  describe "our server" do
    before { start_server(app: "api_retry.rb", args: ["-c", "2", "-q", "default", "-q", "api_slow"]) }

    it "fails a Sidekiq 8 job with failed_at, then retried_at, in integer milliseconds, and Sidekiq's retry delay" do
      fixture = job("job_8_0.json")
      jid = fixture["jid"]
      started = now_ms
      redis.lpush("queue:default", JSON.generate(fixture.merge("enqueued_at" => started)))
      wait_for_failure(jid)
      seen = now_ms

      (entry, score), = sorted_set_jobs("retry")
      expect(entry).to include("jid" => jid, "retry_count" => 0, "created_at" => fixture["created_at"])
      expect(entry["failed_at"]).to be_an(Integer).and be_between(started, seen)
      expect(entry).not_to have_key("retried_at")
      # The score stays float seconds: 1000 s (sidekiq_retry_in) plus rand(10) * (retry_count + 1).
      expect(score - entry["failed_at"] / 1000.0).to be_between(999.9, 1010)
      expect(JobQueue::RetrySet.new.first.failed_at).to eq(time_of_ms(entry["failed_at"]))

      retried = now_ms
      JobQueue::RetrySet.new.first.retry
      wait_for_failure(jid, count: 2)
      (again, score), = sorted_set_jobs("retry")
      expect(again).to include("retry_count" => 0, "failed_at" => entry["failed_at"], "created_at" => fixture["created_at"])
      expect(again["enqueued_at"]).to be_an(Integer).and be >= retried
      expect(again["retried_at"]).to be_an(Integer).and be_between(retried, now_ms)
      expect(score - again["retried_at"] / 1000.0).to be_between(999.9, 1010)
    end

    it "moves a due Sidekiq 8 scheduled job to its queue with enqueued_at in milliseconds" do
      before = now_ms
      redis.zadd("schedule", Time.now.to_f - 1, raw("scheduled_8_0.json"))
      wait_until("the scheduler to move the job") { redis.llen("queue:sk8_parked") == 1 }

      moved = JSON.parse(redis.lindex("queue:sk8_parked", 0))
      expect(moved.except("enqueued_at")).to eq(job("scheduled_8_0.json"))
      expect(moved["enqueued_at"]).to be_an(Integer).and be_between(before, now_ms)
    end

    it "beats with the info fields Sidekiq 8.0 writes, in their shapes" do
      info = registered_process_info
      expected = job("process_8_0.json")

      expect(info.keys).to eq(expected.keys)
      expect(info).to include(
        "capsules" => {"default" => {"concurrency" => 2, "mode" => "strict", "weights" => {"default" => 0, "api_slow" => 0}}},
        "weights" => [{"default" => 0, "api_slow" => 0}],
        "queues" => %w[default api_slow], "embedded" => false, "version" => "queue #{JobQueue::VERSION}"
      )
      expect(info.to_h { |k, v| [k, v.class] }).to eq(expected.to_h { |k, v| [k, v.class] })
    end
  end

  describe "Sidekiq 7.3 and 8.0 processes on the same Redis" do
    it "lists them through ProcessSet with their queues and versions" do
      register_process(redis, raw("process_7_3.json"))
      register_process(redis, raw("process_8_0.json"))

      processes = JobQueue::ProcessSet.new.sort_by(&:identity)
      expect(processes.map { |p| [p.identity, p.queues, p["version"], p["busy"].to_i] }).to eq([
        ["app-1:4242:0123456789ab", %w[critical default], "7.3.10", 1],
        ["app-2:4343:0123456789cd", %w[critical default], "8.0.10", 1]
      ])
      expect(JobQueue::ProcessSet.new.total_concurrency).to eq(10)
    end
  end
end
