# frozen_string_literal: true

require "socket"
require "tmpdir"
require "fileutils"

module ApiSpec
  class ConfigWorker
    include JobQueue::Worker
  end
end

RSpec.describe JobQueue::Configuration do
  subject(:config) { described_class.new }

  let(:redis) { TestRedis.client }

  describe "#redis=" do
    it "takes url:, password: and namespace:, with String or Symbol keys" do
      config.redis = {"url" => "redis://10.0.0.1:6380/2", "namespace" => "app"}
      expect(config.redis_url).to eq("redis://10.0.0.1:6380/2")
      expect(config.namespace).to eq("app:")
    end

    it "puts the password, percent-encoded, into a redis:// URL" do
      config.redis = {url: "redis://10.0.0.1:6380/2", password: "p@ss w:rd/+"}
      uri = URI.parse(config.redis_url)
      expect([uri.host, uri.port, uri.path, uri.user]).to eq(["10.0.0.1", 6380, "/2", ""])
      expect(URI.decode_www_form_component(uri.password.gsub("%20", "+"))).to eq("p@ss w:rd/+")
    end

    it "keeps the user of a URL and replaces its password" do
      config.redis = {url: "rediss://alice:old@10.0.0.1:6380/0", password: "new"}
      expect(config.redis_url).to eq("rediss://alice:new@10.0.0.1:6380/0")
    end

    it "puts the password into a unix:// URL as its pass parameter" do
      config.redis = {url: "unix:///run/redis.sock?db=3", password: "s&cret"}
      expect(config.redis_url).to eq("unix:///run/redis.sock?db=3&pass=s%26cret")
    end

    it "refuses unknown keys, naming them" do
      expect { config.redis = {url: "redis://h", pool_size: 5, driver: :ruby} }.to raise_error(ArgumentError, /unknown redis option\(s\) pool_size, driver/)
    end

    it "falls back to REDIS_URL, then to the local default" do
      original = ENV.delete("REDIS_URL")
      expect(config.redis_url).to eq("redis://127.0.0.1:6379/0")
      ENV["REDIS_URL"] = "redis://from-env:6390/1"
      expect(config.redis_url).to eq("redis://from-env:6390/1")
    ensure
      original ? ENV["REDIS_URL"] = original : ENV.delete("REDIS_URL")
    end

    it "connects to the new URL after a change" do
      JobQueue.configure { |c| c.redis = {url: "unix:///nonexistent/queue-test.sock"} }
      expect { ApiSpec::ConfigWorker.perform_async }.to raise_error(JobQueue::ConnectionError)
      JobQueue.configure { |c| c.redis = {url: TestRedis.url} }
      ApiSpec::ConfigWorker.perform_async
      expect(redis.llen("queue:default")).to eq(1)
    end
  end

  describe "against a Redis that requires a password" do
    password = "p@ss w:rd/+&x"

    let(:dir) { Dir.mktmpdir("queue-password-redis") }
    let(:socket) { File.join(dir, "redis.sock") }
    let(:port) { free_port }
    let(:protected_redis) { Redis.new(path: socket, password: password) }

    around do |example|
      pid = Process.spawn(
        "redis-server", "--port", port.to_s, "--bind", "127.0.0.1", "--unixsocket", socket, "--unixsocketperm", "700",
        "--requirepass", password, "--save", "", "--appendonly", "no", "--dir", dir,
        out: File.join(dir, "redis.log"), err: [:child, :out]
      )
      wait_until("the password-protected redis-server to answer") { protected_redis.ping == "PONG" rescue false }
      example.run
    ensure
      protected_redis.close
      Process.kill("TERM", pid)
      Process.wait(pid)
      FileUtils.rm_rf(dir)
    end

    it "pushes over TCP with the password in the URL" do
      JobQueue.configure { |c| c.redis = {url: "redis://127.0.0.1:#{port}/0", password: password} }
      jid = ApiSpec::ConfigWorker.perform_async
      expect(JSON.parse(protected_redis.lindex("queue:default", 0))["jid"]).to eq(jid)
    end

    it "pushes over a unix socket with the password" do
      JobQueue.configure { |c| c.redis = {url: "unix://#{socket}", password: password} }
      jid = ApiSpec::ConfigWorker.perform_async
      expect(JSON.parse(protected_redis.lindex("queue:default", 0))["jid"]).to eq(jid)
    end

    it "raises a JobQueue::Error without the password, or with a wrong one" do
      JobQueue.configure { |c| c.redis = {url: "unix://#{socket}"} }
      expect { ApiSpec::ConfigWorker.perform_async }.to raise_error(JobQueue::Error)
      JobQueue.configure { |c| c.redis = {url: "redis://127.0.0.1:#{port}/0", password: "wrong"} }
      expect { ApiSpec::ConfigWorker.perform_async }.to raise_error(JobQueue::Error)
      expect(protected_redis.dbsize).to eq(0)
    end
  end

  describe "namespace" do
    it "gets a trailing colon" do
      config.namespace = "resque:gitlab"
      expect(config.namespace).to eq("resque:gitlab:")
      config.namespace = "resque:gitlab:"
      expect(config.namespace).to eq("resque:gitlab:")
      config.namespace = nil
      expect(config.namespace).to eq("")
    end

    it "prefixes every key a push writes" do
      JobQueue.configure { |c| c.namespace = "resque:gitlab:" }
      ApiSpec::ConfigWorker.perform_async(1)
      ApiSpec::ConfigWorker.perform_in(600, 2)
      JobQueue::Client.push_bulk("class" => ApiSpec::ConfigWorker, "args" => [[3]], "queue" => "bulk")

      expect(redis.keys("*")).to contain_exactly(
        "resque:gitlab:queues", "resque:gitlab:queue:default", "resque:gitlab:queue:bulk", "resque:gitlab:schedule"
      )
      expect(redis.smembers("resque:gitlab:queues")).to contain_exactly("default", "bulk")
      expect(queued_jobs("default", namespace: "resque:gitlab:").first["args"]).to eq([1])
      expect(sorted_set_jobs("resque:gitlab:schedule").first.first["args"]).to eq([2])
    end

    it "is taken from redis = {namespace:}" do
      JobQueue.configure { |c| c.redis = {url: TestRedis.url, namespace: "ns"} }
      ApiSpec::ConfigWorker.perform_async
      expect(redis.keys("*")).to contain_exactly("ns:queues", "ns:queue:default")
    end
  end

  describe "server settings" do
    it "accepts a positive Integer concurrency and refuses anything else" do
      config.concurrency = 3
      expect(config.concurrency).to eq(3)
      [0, -1, 2.5, "4", nil].each do |bad|
        expect { config.concurrency = bad }.to raise_error(ArgumentError, /concurrency/)
      end
      expect(config.concurrency).to eq(3)
    end

    it "accepts a non-negative timeout and refuses anything else" do
      config.timeout = 0
      config.timeout = 7.5
      expect(config.timeout).to eq(7.5)
      [-1, "25", nil].each do |bad|
        expect { config.timeout = bad }.to raise_error(ArgumentError, /timeout/)
      end
    end

    it "takes max_batch from 1 to 1000 and refuses anything else" do
      expect(config.max_batch).to eq(100)
      config.max_batch = 1
      config.max_batch = 1000
      expect(config.max_batch).to eq(1000)
      [0, 1001, -5, 2.5, "20", nil].each do |bad|
        expect { config.max_batch = bad }.to raise_error(ArgumentError, /max_batch must be an Integer in 1\.\.1000, got #{Regexp.escape(bad.inspect)}/)
      end
      expect(config.max_batch).to eq(1000)
    end

    it "scans for gitlab-sidekiq-fetcher's working lists every 60 s unless set; false turns it off" do
      expect(config.gitlab_fetcher_scan).to eq(60)
      config.gitlab_fetcher_scan = 600
      expect(config.gitlab_fetcher_scan).to eq(600)
      config.gitlab_fetcher_scan = false
      expect(config.gitlab_fetcher_scan).to be_nil
      [0, -5, 2.5, "60", true].each do |bad|
        expect { config.gitlab_fetcher_scan = bad }.to raise_error(ArgumentError, /gitlab_fetcher_scan must be a positive Integer \(seconds\) or false, got #{Regexp.escape(bad.inspect)}/)
      end
      expect(config.gitlab_fetcher_scan).to be_nil
    end

    it "takes busy_poll_us from 0 to 1000 microseconds, 100 unless set, and refuses anything else" do
      expect(config.busy_poll_us).to eq(100)
      config.busy_poll_us = 0
      config.busy_poll_us = 1000
      expect(config.busy_poll_us).to eq(1000)
      [-1, 1001, 2.5, "50", nil].each do |bad|
        expect { config.busy_poll_us = bad }.to raise_error(ArgumentError, /busy_poll_us must be an Integer in 0\.\.1000, got #{Regexp.escape(bad.inspect)}/)
      end
      expect(config.busy_poll_us).to eq(1000)
    end

    it "takes malloc_arena_max as nil or 1 to 1024 arenas, 2 unless set, and refuses anything else" do
      expect(config.malloc_arena_max).to eq(2)
      config.malloc_arena_max = nil
      expect(config.malloc_arena_max).to be_nil
      config.malloc_arena_max = 8
      [0, 1025, 2.5, "2", false].each do |bad|
        expect { config.malloc_arena_max = bad }.to raise_error(ArgumentError, /malloc_arena_max must be nil or an Integer in 1\.\.1024, got #{Regexp.escape(bad.inspect)}/)
      end
      expect(config.malloc_arena_max).to eq(8)
    end

    it "takes job_thread_policy as :batch or nil, :batch unless set, and refuses anything else" do
      expect(config.job_thread_policy).to eq(:batch)
      config.job_thread_policy = nil
      expect(config.job_thread_policy).to be_nil
      [:normal, "batch", :idle, true].each do |bad|
        expect { config.job_thread_policy = bad }.to raise_error(ArgumentError, /job_thread_policy must be :batch or nil, got #{Regexp.escape(bad.inspect)}/)
      end
      expect(config.job_thread_policy).to be_nil
    end

    it "takes gc_malloc_growth as nil or a positive number of bytes, 4 MB unless set, and refuses anything else" do
      expect(config.gc_malloc_growth).to eq(4 << 20)
      config.gc_malloc_growth = nil
      expect(config.gc_malloc_growth).to be_nil
      config.gc_malloc_growth = 1 << 20
      [0, -1, 2.5, "4", false].each do |bad|
        expect { config.gc_malloc_growth = bad }.to raise_error(ArgumentError, /gc_malloc_growth must be nil or a positive Integer \(bytes\), got #{Regexp.escape(bad.inspect)}/)
      end
      expect(config.gc_malloc_growth).to eq(1 << 20)
    end

    it "takes malloc_trim_interval as nil or a positive number of seconds, 5 unless set, and refuses anything else" do
      expect(config.malloc_trim_interval).to eq(5)
      config.malloc_trim_interval = nil
      expect(config.malloc_trim_interval).to be_nil
      config.malloc_trim_interval = 0.5
      [0, -1, Float::INFINITY, Float::NAN, "5", false].each do |bad|
        expect { config.malloc_trim_interval = bad }.to raise_error(ArgumentError, /malloc_trim_interval must be nil or a positive number of seconds/)
      end
      expect(config.malloc_trim_interval).to eq(0.5)
    end

    it "parses queues with optional weights, as strings or pairs" do
      config.queues = ["critical,3", "default", " low , 2 ", ["bulk", 4], ["tiny", "0"], [:sym]]
      expect(config.queues).to eq([["critical", 3], ["default", 1], ["low", 2], ["bulk", 4], ["tiny", 1], ["sym", 1]])
      expect(config.queue_names).to eq(%w[critical default low bulk tiny sym])
    end

    describe "strict or weighted order (Sidekiq 6.4's rule)" do
      it "is strict by default and when no queue has a weight" do
        expect(config.strict_order?).to be(true)
        config.queues = ["a", ["b"], "c"]
        expect(config.strict_order?).to be(true)
      end

      it "is weighted as soon as one queue has a positive weight, equal weights included" do
        {
          ["a,1", "b,1"] => [["a", 1], ["b", 1]],
          ["a", "b,1"] => [["a", 1], ["b", 1]],
          ["a,3", "b"] => [["a", 3], ["b", 1]],
          [["a", 5], ["b", 3], ["c", 2]] => [["a", 5], ["b", 3], ["c", 2]]
        }.each do |specs, queues|
          config.queues = specs
          expect([config.queues, config.strict_order?]).to eq([queues, false]), specs.inspect
        end
      end

      it "counts weight 0 as 1, which on its own keeps the order strict" do
        config.queues = ["a,0", ["b", 0], "c"]
        expect([config.queues, config.strict_order?]).to eq([[["a", 1], ["b", 1], ["c", 1]], true])
        config.queues = ["a,0", "b,2"]
        expect([config.queues, config.strict_order?]).to eq([[["a", 1], ["b", 2]], false])
      end
    end

    it "refuses empty, duplicated or badly weighted queues, naming the spec" do
      expect { config.queues = [] }.to raise_error(ArgumentError, /at least one/)
      expect { config.queues = ["a", "a,2"] }.to raise_error(ArgumentError, /"a" is listed twice/)
      expect { config.queues = [",2"] }.to raise_error(ArgumentError, /empty/)
      expect { config.queues = [["a", 2, 3]] }.to raise_error(ArgumentError, /\["a", 2, 3\]: expected \[name, weight\]/)
      ["a,-1", "a,x", "a,1.5", "a,", "a,1,2", "a,0x10", "a,1000001", ["a", -1], ["a", 2.0], ["a", "two"]].each do |bad|
        expect { config.queues = ["ok,2", bad] }.to raise_error(ArgumentError, /weight must be a whole number from 0 to 1000000, got .* \(in #{Regexp.escape(bad.inspect)}\)/)
      end
      expect([config.queues, config.strict_order?]).to eq([[["default", 1]], true])
    end
  end

  describe "busy_poll_us, against Redis over TCP" do
    # Each push is one write; the thread's connection polls once for its reply, or (backing off after
    # a reply that took longer than the limit) sleeps at once: one of the three counts per push.
    def push_and_count(pushes)
      before = redis.llen("queue:default")
      pushes.times { |i| ApiSpec::ConfigWorker.perform_async(i) }
      expect(redis.llen("queue:default")).to eq(before + pushes)
      JobQueue.engine.poll_counts
    end

    it "makes each push poll its socket for the reply, and a new limit takes a new engine" do
      JobQueue.configure { |c| c.redis = {url: TestRedis.tcp_url} }
      counts = push_and_count(20)
      expect(counts.values.sum).to eq(20)
      # A local Redis answers within the default 100 µs unless the machine is very busy.
      expect(counts["hits"]).to be >= 1

      JobQueue.configure { |c| c.busy_poll_us = 1000 }
      counts = push_and_count(30)
      expect(counts.values.sum).to eq(30)
      expect(counts["hits"]).to be >= 1
    end

    it "never polls when set to 0, nor over a unix socket" do
      JobQueue.configure do |c|
        c.redis = {url: TestRedis.tcp_url}
        c.busy_poll_us = 0
      end
      expect(push_and_count(5)).to be_nil
      JobQueue.configure do |c|
        c.redis = {url: TestRedis.url}
        c.busy_poll_us = 100
      end
      expect(push_and_count(10)).to be_nil
    end
  end

  describe "JobQueue.configure_client and configure_server" do
    it "yields only the client block outside the server" do
      yielded = []
      JobQueue.configure_client { yielded << :client }
      JobQueue.configure_server { yielded << :server }
      expect(yielded).to eq([:client])
    end
  end

  it "raises JobQueue::ConnectionError when Redis cannot be reached" do
    JobQueue.configure { |c| c.redis = {url: "unix:///nonexistent/queue-test/redis.sock"} }
    expect { ApiSpec::ConfigWorker.perform_async }.to raise_error(JobQueue::ConnectionError)
    expect { ApiSpec::ConfigWorker.perform_in(60) }.to raise_error(JobQueue::ConnectionError)
    expect { JobQueue.stats }.to raise_error(JobQueue::ConnectionError)
  end

  it "reports totals through JobQueue.stats" do
    ApiSpec::ConfigWorker.perform_async
    ApiSpec::ConfigWorker.set(queue: "other").perform_async
    ApiSpec::ConfigWorker.perform_in(60)
    expect(JobQueue.stats).to include(
      "enqueued" => 2, "scheduled_size" => 1, "retry_size" => 0, "dead_size" => 0, "queues" => {"default" => 1, "other" => 1}
    )
  end
end
