# frozen_string_literal: true

require "rack/test"
require "queue/metrics"
require_relative "../apps/metrics"

# /metrics over real jobs run by a real exe/queue process: counts per class and queue (processed,
# failed, deduplicated drops), the duration histogram and the gauges, scraped through Rack.
RSpec.describe JobQueue::Metrics do
  include Rack::Test::Methods

  def app = JobQueue::Metrics

  # `name{labels}` => value, from the exposition text.
  def samples(text)
    text.each_line.reject { |l| l.start_with?("#") || l.strip.empty? }.to_h do |line|
      name, value = line.chomp.split(/ (?=[^ ]+\z)/)
      [name, Float(value)]
    end
  end

  def scrape
    get "/"
    expect(last_response.status).to eq(200)
    samples(last_response.body)
  end

  it "counts jobs per class and queue in the engine, with durations, drops and gauges" do
    5.times { |i| MetricsOkWorker.perform_async(i) }
    3.times { MetricsOkWorker.perform_async(0) } # held by the first: dropped
    2.times { |i| MetricsFailingWorker.perform_async("boom #{i}") }
    2.times { MetricsSlowWorker.perform_async(0.03) }
    expect(TestRedis.client.llen("queue:metrics_ok")).to eq(5)

    before = scrape
    expect(before['queue_dedup_dropped_total{class="MetricsOkWorker",queue="metrics_ok"}']).to eq(3)
    expect(before['queue_queue_size{queue="metrics_ok"}']).to eq(5)
    expect(before['queue_queue_latency_seconds{queue="metrics_ok"}']).to be >= 0
    expect(before["queue_processes"]).to eq(0)

    server = start_server(app: "metrics.rb", args: ["-c", "2", "-q", "metrics_ok", "-q", "metrics_failing", "-q", "metrics_slow"])
    # Counted in the server's memory, in Redis with its next liveness beat (every 3 s).
    s = wait_until("the beat to carry every count") do
      m = scrape
      m if m['queue_job_duration_seconds_count{class="MetricsSlowWorker",queue="metrics_slow"}'] == 2 &&
        m['queue_jobs_processed_total{class="MetricsOkWorker",queue="metrics_ok"}'] == 5 &&
        m['queue_jobs_failed_total{class="MetricsFailingWorker",queue="metrics_failing"}'] == 2
    end
    ok = ->(kind, klass, queue, extra = "") { s["queue_#{kind}{#{extra}class=\"#{klass}\",queue=\"#{queue}\"}"] }

    expect(ok.call("jobs_failed_total", "MetricsOkWorker", "metrics_ok")).to eq(0)
    expect(ok.call("jobs_processed_total", "MetricsFailingWorker", "metrics_failing")).to eq(0)
    expect(ok.call("jobs_processed_total", "MetricsSlowWorker", "metrics_slow")).to eq(2)
    expect(ok.call("dedup_dropped_total", "MetricsOkWorker", "metrics_ok")).to eq(3)
    # The histogram: 0.03 s jobs land above 0.025 and at or below 0.05 (well below 1 s on any machine).
    slow = ->(le) { ok.call("job_duration_seconds_bucket", "MetricsSlowWorker", "metrics_slow", "le=\"#{le}\",") }
    expect(slow.call("0.025")).to eq(0)
    expect(slow.call("1.0")).to eq(2)
    expect(slow.call("+Inf")).to eq(2)
    expect(ok.call("job_duration_seconds_sum", "MetricsSlowWorker", "metrics_slow")).to be_between(0.06, 2.0)
    expect(ok.call("job_duration_seconds_count", "MetricsOkWorker", "metrics_ok")).to eq(5)
    expect(ok.call("job_duration_seconds_count", "MetricsFailingWorker", "metrics_failing")).to eq(2)
    expect(s['queue_queue_size{queue="metrics_ok"}']).to eq(0)
    expect(s['queue_queue_latency_seconds{queue="metrics_ok"}']).to eq(0)
    expect(s["queue_processes"]).to eq(1)
    expect(s["queue_busy"]).to eq(0).or eq(1).or eq(2)
    expect(s["queue_dead_size"]).to eq(0) # retry: false discards
    expect(s["queue_retry_size"]).to eq(0)

    expect(server.stop.exitstatus).to eq(0)
    after = scrape
    expect(after["queue_processes"]).to eq(0)
    expect(after['queue_jobs_processed_total{class="MetricsOkWorker",queue="metrics_ok"}']).to eq(5)
  end

  it "answers with the crate's OpenMetrics text and refuses other methods" do
    get "/"
    expect(last_response.headers["content-type"]).to eq("application/openmetrics-text; version=1.0.0; charset=utf-8")
    expect(last_response.body).to include("# TYPE queue_job_duration_seconds histogram\n", "# TYPE queue_dead_size gauge\n")
    expect(last_response.body).to end_with("# EOF\n")
    head "/"
    expect([last_response.status, last_response.body]).to eq([200, ""])
    post "/"
    expect(last_response.status).to eq(405)
    expect(last_response.headers["allow"]).to eq("GET, HEAD")
  end

  it "reports ordered workers' morgue sizes by worker name" do
    worker = ordered_worker("MetricsOrderedWorker") { self.shards_count = 2 }
    TestRedis.client.zadd(lowkiq_key(worker, "morgue:all_ids_scored_by_updated_at"), 1, "order-1")
    s = samples(JobQueue::Metrics.text)
    expect(s['queue_ordered_morgue_size{worker="MetricsOrderedWorker"}']).to eq(1)
    expect(s['queue_ordered_queue_size{worker="MetricsOrderedWorker"}']).to eq(0)
  end
end
