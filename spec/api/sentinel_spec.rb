# frozen_string_literal: true

require "yaml"
require "queue/rails_integration/config_file"
require_relative "../apps/sentinel"

# Redis Sentinel (issue #22 point 1), the options redis-rb 4.x and Sidekiq take: `sentinels:`, the
# master's name from `name:` or the URL's host, `role: :master`, `sentinel_password:`. The engine and
# JobQueue.redis both find the master through the sentinels, against real redis-server and
# redis-sentinel processes (spec/support/sentinel_servers.rb).
RSpec.describe "Redis Sentinel" do
  describe "options" do
    let(:config) { JobQueue::Configuration.new }

    it "takes sentinels as Hashes or host:port Strings, and the master's name from name: or the URL's host" do
      config.redis = {url: "redis://:pw@mymaster/3", sentinels: [{host: "10.0.0.1", port: 26_379}, "10.0.0.2:26380", "redis://10.0.0.3:26381"]}
      expect(config.redis_options.engine_sentinel).to eq(["mymaster", [["10.0.0.1", 26_379], ["10.0.0.2", 26_380], ["10.0.0.3", 26_381]], nil, nil])
      expect(config.redis_url).to eq("redis://:pw@mymaster/3")

      config.redis = {url: "redis://ignored/1", name: "other", sentinels: [{"host" => "s1", "port" => "26379"}], sentinel_password: "spw", role: "master"}
      expect(config.redis_options.engine_sentinel).to eq(["other", [["s1", 26_379]], nil, "spw"])
      expect(config.redis_url).to eq("redis://other/1")
    end

    it "hands redis-rb 4.x the master's name as host and the sentinel password in each sentinel" do
      options = JobQueue::RedisOptions.new(url: "redis://mymaster/0", password: "pw", sentinels: ["s1:1", {host: "s2", port: 2}], sentinel_password: "spw")
      expect(options.client_options).to eq(
        url: "redis://mymaster/0", password: "pw", host: "mymaster", role: :master,
        sentinels: [{host: "s1", port: 1, password: "spw"}, {host: "s2", port: 2, password: "spw"}]
      )
    end

    it "refuses a replica role, naming it and saying why" do
      %i[replica slave].each do |role|
        expect { config.redis = {url: "redis://mymaster/0", sentinels: ["s:1"], role: role} }
          .to raise_error(ArgumentError, /role: :#{role} is not supported.*use role: :master/)
      end
    end

    it "refuses a bad sentinel list, or Sentinel options without sentinels, naming the option" do
      bad = [
        [{sentinels: []}, /invalid redis option sentinels: \[\]/],
        [{sentinels: "s:1"}, /invalid redis option sentinels: "s:1"/],
        [{sentinels: [{host: "s"}, {port: 1}]}, /sentinel \{:port=>1\}.*needs a host/],
        [{sentinels: [{host: "s", port: 0}]}, /has an invalid port/],
        [{sentinels: [{host: "s", port: 1, db: 2}]}, /unknown key\(s\) db in sentinel/],
        [{sentinels: ["http://s:1"]}, /invalid sentinel "http:\/\/s:1"/],
        [{url: "unix:///tmp/r.sock", sentinels: ["s:1"]}, /needs a redis:\/\/ or rediss:\/\/ URL/],
        [{name: "mymaster"}, /name need sentinels:/],
        [{sentinel_password: "x"}, /sentinel_password need sentinels:/],
        [{sentinels: [{host: "a", port: 1, password: "x"}, {host: "b", port: 2, password: "y"}]}, /set sentinel_password:/]
      ]
      bad.each do |options, message|
        expect { config.redis = options }.to raise_error(ArgumentError, message), "for #{options.inspect}"
      end
    end

    it "reads them from config/queue.yml's redis: section" do
      Dir.mktmpdir do |dir|
        path = File.join(dir, "queue.yml")
        File.write(path, <<~YAML)
          production:
            redis:
              url: redis://mymaster/2
              role: master
              sentinel_password: spw
              sentinels:
                - host: 10.0.0.1
                  port: 26379
                - "10.0.0.2:26379"
        YAML
        JobQueue::RailsIntegration::ConfigFile.apply(path, "production", config)
      end
      expect(config.redis_options.engine_sentinel).to eq(["mymaster", [["10.0.0.1", 26_379], ["10.0.0.2", 26_379]], nil, "spw"])
      expect(config.redis_url).to eq("redis://mymaster/2")
    end
  end

  context "with a primary, a replica and three sentinels" do
    let(:set) { SentinelServers.new.start }
    let(:server) do
      ServerProcess.new(app: "sentinel.rb", args: ["-c", "2", "-q", "default"],
        env: {"SENTINELS" => set.sentinel_ports.map { |p| "127.0.0.1:#{p}" }.join(","), "REDIS_URL" => nil}).start
    end

    before do
      JobQueue.configure { |c| c.redis = {url: "redis://mymaster/0", sentinels: set.sentinels, role: :master} }
    end

    after do |example|
      warn("--- server log:\n#{server.output}") if example.exception && @server_started
      server.ensure_stopped if @server_started
      JobQueue.redis_pool.shutdown
      set.stop
    end

    def on(port, &block)
      set.client(port, &block)
    end

    it "pushes, runs jobs and reaches JobQueue.redis through the sentinels" do
      SentinelWorker.perform_async(1)
      expect(on(set.primary_port) { |c| c.llen("queue:default") }).to eq(1)
      expect(JobQueue.redis { |c| c.role.first.then { |role| [c.connection[:port], role] } }).to eq([set.primary_port, "master"])

      @server_started = server
      wait_until("the job to run") { on(set.primary_port) { |c| c.lrange("ran", 0, -1) } == ["1"] }
    end

    it "keeps a running server running across SENTINEL FAILOVER, and runs jobs pushed to the new master" do
      @server_started = server
      SentinelWorker.perform_async(0)
      wait_until("the first job to run") { on(set.primary_port) { |c| c.lrange("ran", 0, -1) } == ["0"] }

      promoted = set.failover!
      # Until the sentinels reconfigure the old master as a replica (~10 s later) it still takes
      # writes, which its resync then drops (Redis's asynchronous replication, the window the README
      # states). The engine hears the sentinels' +switch-master and moves every connection at once, in
      # this process and the server's. Pushes go on until a job's run is recorded on the new master
      # (through the server's engine). A push may fail meanwhile with a connection error; it is not
      # resent.
      id = 0
      recorded = ->(c) { c.lrange("queue:record", 0, -1).map { |j| JSON.parse(j)["args"].first }.reject(&:zero?) }
      wait_until("a job pushed after the failover to run on the new master", timeout: 60) do
        id += 1
        begin
          SentinelWorker.perform_async(id)
        rescue JobQueue::ConnectionError
          nil
        end
        on(set.replica_port) { |c| recorded.call(c) }&.any?
      end
      seconds = Process.clock_gettime(Process::CLOCK_MONOTONIC) - promoted
      warn(format("Sentinel failover: the first job run recorded on the new master %.1f s after the promotion", seconds))
      expect(seconds).to be < 30
      wait_until("the old master demoted") { set.role(set.primary_port) == "slave" }
      expect(server.running?).to be(true)
      # The heartbeat beats on the new master too (the same process, not a restart).
      identity = on(set.replica_port) { |c| c.smembers("processes") }.find { |i| i.split(":")[-2] == server.pid.to_s }
      since = Time.now.to_f
      wait_until("a heartbeat on the new master") { on(set.replica_port) { |c| c.hget(identity, "beat") }.to_f > since }

      # JobQueue.redis reaches the new master (a connection the sentinels closed is redialled).
      role = nil
      wait_until("JobQueue.redis on the new master") do
        # ROLE first: redis-rb reports the resolved address once connected.
        role = JobQueue.redis { |c| c.role.first.then { |r| [c.connection[:port], r] } }
      rescue Redis::BaseConnectionError
        nil
      end
      expect(role).to eq([set.replica_port, "master"])
    end
  end

  context "with sentinels that require a password" do
    let(:set) { SentinelServers.new(sentinel_password: "s3ntinel").start }

    after do
      JobQueue.redis_pool.shutdown
      set.stop
    end

    it "sends sentinel_password: to the sentinels, from the engine and JobQueue.redis" do
      JobQueue.configure { |c| c.redis = {url: "redis://mymaster/0", sentinels: set.sentinels, sentinel_password: "s3ntinel"} }
      SentinelWorker.perform_async(1)
      expect(set.client(set.primary_port) { |c| c.llen("queue:default") }).to eq(1)
      expect(JobQueue.redis { |c| c.role.first.then { |role| [c.connection[:port], role] } }).to eq([set.primary_port, "master"])
    end

    it "says each sentinel refused a missing or wrong password" do
      [{}, {sentinel_password: "wrong"}].each do |password|
        JobQueue.configure { |c| c.redis = {url: "redis://mymaster/0", sentinels: set.sentinels.first(1)}.merge(password) }
        expect { SentinelWorker.perform_async(1) }.to raise_error(JobQueue::ConnectionError) { |e|
          expect(e.message).to match(/sentinel 127\.0\.0\.1:#{set.sentinel_ports.first} answered with an error: .*(NOAUTH|WRONGPASS|authentication)/i)
        }
      end
    end
  end

  context "when no sentinel gives the master" do
    let(:set) { SentinelServers.new.start }

    after { set.stop }

    it "says which sentinels were tried and what each said" do
      closed = free_port
      JobQueue.configure do |c|
        c.redis = {url: "redis://nosuchmaster/0", sentinels: [{host: "127.0.0.1", port: set.sentinel_ports.first}, "127.0.0.1:#{closed}"]}
      end
      expect { SentinelWorker.perform_async(1) }.to raise_error(JobQueue::ConnectionError) { |e|
        expect(e.message).to include("cannot find the Redis master for redis://nosuchmaster/0 through Sentinel")
        expect(e.message).to include(%(sentinel 127.0.0.1:#{set.sentinel_ports.first} knows no master named "nosuchmaster"))
        expect(e.message).to include("sentinel 127.0.0.1:#{closed} unreachable")
      }
    end
  end
end
