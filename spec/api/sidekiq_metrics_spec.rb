# frozen_string_literal: true

require_relative "../apps/sidekiq_metrics"

# Sidekiq 7/8's own Metrics page over jobs run by a real exe/queue process (config.sidekiq_metrics):
# the keys are read back as Sidekiq's Metrics::Query reads them (v7.3.10 and v8.0.10,
# lib/sidekiq/metrics/query.rb and shared.rb), the key names spelt here with Ruby's strftime as
# Sidekiq spells them, independently of the engine's Rust.
RSpec.describe "Sidekiq 7/8 Metrics page data" do
  # Sidekiq's Histogram::FETCH: the 26 u16 counters.
  let(:fetch) { (0..25).flat_map { |i| ["GET", "u16", "##{i}"] } }

  # Every UTC minute from `from` to now.
  def minutes_since(from)
    t = Time.at(from.to_i - from.to_i % 60).utc
    out = []
    while t <= Time.now.utc
      out << t
      t += 60
    end
    out
  end

  # Sidekiq 7.3's Query#for_job and Histogram#fetch, summed over `times`: {"p", "f", "ms", hist}.
  def sidekiq7_for_job(klass, times)
    times.each_with_object({"p" => 0, "f" => 0, "ms" => 0, "hist" => Array.new(26, 0), "ms?" => false}) do |time, acc|
      ms, p, f = TestRedis.client.hmget("j|#{time.strftime("%Y%m%d")}|#{time.hour}:#{time.min}", "#{klass}|ms", "#{klass}|p", "#{klass}|f")
      acc["ms?"] ||= !ms.nil?
      acc["ms"] += ms.to_i
      acc["p"] += p.to_i
      acc["f"] += f.to_i
      hist = TestRedis.client.call("BITFIELD_RO", "#{klass}-#{time.utc.strftime("%d-%H:%-M")}", *fetch)
      acc["hist"] = acc["hist"].zip(hist).map(&:sum)
    end
  end

  # Sidekiq 8.0's keys: the minute hash, the ten-minute hash and the `h|` histogram.
  def sidekiq8_for_job(klass, times)
    times.each_with_object({"p" => 0, "f" => 0, "ms" => 0, "hist" => Array.new(26, 0), "p10" => 0}) do |time, acc|
      short = "j|#{time.strftime("%y%m%d|%-H:%M")}"
      ms, p, f = TestRedis.client.hmget(short, "#{klass}|ms", "#{klass}|p", "#{klass}|f")
      acc["ms"] += ms.to_i
      acc["p"] += p.to_i
      acc["f"] += f.to_i
      hist = TestRedis.client.call("BITFIELD_RO", "h|#{klass}-#{time.utc.strftime("%-d-%-H:%-M")}", *fetch)
      acc["hist"] = acc["hist"].zip(hist).map(&:sum)
    end.tap do |acc|
      mids = times.map { |t| "j|#{t.strftime("%y%m%d|%-H:%M")[0..-2]}" }.uniq
      acc["p10"] = mids.sum { |key| TestRedis.client.hget(key, "#{klass}|p").to_i }
    end
  end

  def run_jobs(version)
    2.times { SkMetricsSleepWorker.perform_async(0.03) }
    SkMetricsSleepWorker.perform_async(0.4)
    SkMetricsFailingWorker.perform_async
    start = Time.now.utc
    server = start_server(app: "sidekiq_metrics.rb", args: ["-c", "2", "-q", "sk_metrics"], env: {"SIDEKIQ_METRICS" => version})
    wait_until("the four jobs to run") { TestRedis.client.llen("ran:sk_metrics") == 4 }
    expect(server.stop.exitstatus).to eq(0) # the stop flushes what the last beat did not
    start
  end

  it "writes Sidekiq 7.3's minute hashes and histograms by default" do
    start = run_jobs("7")
    sleep_job = sidekiq7_for_job("SkMetricsSleepWorker", minutes_since(start))
    expect(sleep_job.values_at("p", "f")).to eq([3, 0])
    expect(sleep_job["ms"]).to be_between(30 + 30 + 400, 3000)
    # 30 ms sleeps take at least 30 ms: bucket 2 (30 ≤ ms < 45) or above, never 0 or 1; 400 ms is
    # bucket 8 (335 ≤ ms < 500) or above.
    expect(sleep_job["hist"].sum).to eq(3)
    expect(sleep_job["hist"][0..1]).to eq([0, 0])
    expect(sleep_job["hist"][8..].sum).to be >= 1
    expect(sleep_job["hist"][0..7].sum).to be >= 1 # the loaded machine may slow a 30 ms job, not both past 335 ms

    failing = sidekiq7_for_job("SkMetricsFailingWorker", minutes_since(start))
    expect(failing.values_at("p", "f", "ms?")).to eq([1, 1, false]) # failures are counted, not timed
    expect(failing["hist"].sum).to eq(0)

    key = TestRedis.client.keys("j|*").first
    expect(key).to match(/\Aj\|\d{8}\|\d{1,2}:\d{1,2}\z/)
    expect(TestRedis.client.ttl(key)).to be_between(8 * 3600 - 120, 8 * 3600)
    expect(TestRedis.client.keys("h|*")).to eq([])
  end

  it "writes Sidekiq 8.0's keys with sidekiq_metrics = 8" do
    start = run_jobs("8")
    sleep_job = sidekiq8_for_job("SkMetricsSleepWorker", minutes_since(start))
    expect(sleep_job.values_at("p", "f", "p10")).to eq([3, 0, 3])
    expect(sleep_job["hist"].sum).to eq(3)
    expect(sleep_job["hist"][0..1]).to eq([0, 0])
    failing = sidekiq8_for_job("SkMetricsFailingWorker", minutes_since(start))
    expect(failing.values_at("p", "f", "p10")).to eq([1, 1, 1])
    expect(TestRedis.client.keys("SkMetrics*")).to eq([]) # no Sidekiq 7 histograms
  end

  it "writes none of them with sidekiq_metrics = false" do
    run_jobs("false")
    expect(TestRedis.client.keys("j|*") + TestRedis.client.keys("*SkMetrics*")).to eq([])
  end

  it "takes 7, 8 or false only" do
    config = JobQueue::Configuration.new
    expect(config.sidekiq_metrics).to eq(7)
    config.sidekiq_metrics = 8
    expect(config.sidekiq_metrics).to eq(8)
    config.sidekiq_metrics = false
    expect(config.sidekiq_metrics).to be(false)
    [6, 7.0, "7", nil, true].each do |bad|
      expect { config.sidekiq_metrics = bad }.to raise_error(ArgumentError, /sidekiq_metrics must be one of \[7, 8, false\]/)
    end
  end
end
