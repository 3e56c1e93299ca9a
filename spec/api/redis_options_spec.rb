# frozen_string_literal: true

require "stringio"
require "tmpdir"

module ApiSpec
  class RedisOptionsWorker
    include JobQueue::Worker
  end
end

# Sidekiq 6.4.1's `config.redis = {...}` (redis_connection.rb): the options go to redis-rb, whose URL
# parts host:, port:, db:, password: override; size:, pool_timeout: size its ConnectionPool;
# network_timeout: becomes redis-rb's timeout; `Sidekiq.redis { |conn| }` checks a connection out.
# Ours: the engine dials the URL these options make, JobQueue.redis's pool gets the rest.
RSpec.describe "config.redis options and JobQueue.redis" do
  let(:log) { StringIO.new }

  before { JobQueue.config.logger = Logger.new(log) }

  # A redis-server on TCP with a password (the suite's own listens on a unix socket only).
  def with_tcp_redis(password:)
    Dir.mktmpdir("queue-redis-tcp") do |dir|
      port = free_port
      pid = Process.spawn("redis-server", "--port", port.to_s, "--bind", "127.0.0.1", "--requirepass", password,
        "--save", "", "--appendonly", "no", "--dir", dir, out: File::NULL, err: File::NULL)
      wait_until("redis-server to listen on #{port}") { listening?(port) }
      yield port
    ensure
      Process.kill("TERM", pid) && Process.wait(pid) if pid
    end
  end

  it "yields a connection to the configured Redis, and the gem's pushes land where it looks" do
    JobQueue.redis { |conn| conn.set("app:key", "from the app") }
    jid = ApiSpec::RedisOptionsWorker.perform_async(1)

    expect(TestRedis.client.get("app:key")).to eq("from the app")
    expect(JobQueue.redis { |conn| conn.lrange("queue:default", 0, -1) }.map { |j| JSON.parse(j)["jid"] }).to eq([jid])
  end

  it "dials host:, port:, db: and password: with both the engine and JobQueue.redis, as redis-rb reads them" do
    with_tcp_redis(password: "s3cret") do |port|
      JobQueue.configure { |c| c.redis = {host: "127.0.0.1", port: port, db: 4, password: "s3cret", size: 2, pool_timeout: 2} }
      ApiSpec::RedisOptionsWorker.perform_async("tcp")

      direct = Redis.new(host: "127.0.0.1", port: port, db: 4, password: "s3cret")
      expect(direct.llen("queue:default")).to eq(1)
      expect(JobQueue.redis { |conn| [conn.llen("queue:default"), conn.connection[:db]] }).to eq([1, 4])
      expect(JobQueue.redis_pool.size).to eq(2)
      expect(JobQueue.config.redis_url).to eq("redis://:s3cret@127.0.0.1:#{port}/4")
      direct.close
    end
  end

  it "overrides the parts of url: (or REDIS_URL) that host:, port: or db: name, as redis-rb does" do
    config = JobQueue::Configuration.new
    config.redis = {url: "redis://10.0.0.1:6380/2", db: 5}
    expect(config.redis_url).to eq("redis://10.0.0.1:6380/5")
    config.redis = {url: "redis://10.0.0.1:6380/2", host: "10.0.0.9", ssl: true}
    expect(config.redis_url).to eq("rediss://10.0.0.9:6380/2")
    config.redis = {path: "/run/redis.sock", db: 1, password: "p"}
    expect(config.redis_url).to eq("unix:///run/redis.sock?db=1&pass=p")
  end

  it "refuses an option of the wrong type, naming it" do
    expect { JobQueue.config.redis = {port: "6379x"} }.to raise_error(ArgumentError, 'invalid redis option port: "6379x"')
    expect { JobQueue.config.redis = {size: 0} }.to raise_error(ArgumentError, "invalid redis option size: 0")
  end

  it "warns once that network_timeout: and ssl_params' certificates reach JobQueue.redis but not the engine" do
    2.times do
      JobQueue.config.redis = {url: TestRedis.url, network_timeout: 3, ssl_params: {ca_file: "/etc/ca.pem", cert: "c", key: "k"}}
    end
    expect(log.string.scan(/WARN -- : redis option network_timeout: applies to JobQueue.redis connections only/).size).to eq(1)
    expect(log.string.scan(/WARN -- : redis ssl_params cert, key: applies to JobQueue.redis connections only/).size).to eq(1)
    expect(JobQueue.redis { |conn| conn.ping }).to eq("PONG")
  end

  it "takes Sidekiq 7's redis-client option names: timeouts and reconnect_attempts reach JobQueue.redis, with a warning" do
    JobQueue.config.redis = {url: TestRedis.url, timeout: 2, connect_timeout: 1.5, read_timeout: 3, write_timeout: 4, reconnect_attempts: 2}
    options = JobQueue.redis { |conn| conn._client.options }
    expect(options.values_at(:connect_timeout, :read_timeout, :write_timeout, :reconnect_attempts)).to eq([1.5, 3.0, 4.0, 2])
    expect(log.string.scan(/WARN -- : redis option (\w+): applies to JobQueue.redis connections only/).flatten)
      .to eq(%w[timeout connect_timeout read_timeout write_timeout reconnect_attempts])
    expect { JobQueue.config.redis = {read_timeout: 0} }.to raise_error(ArgumentError, "invalid redis option read_timeout: 0")
    expect(JobQueue.redis { |conn| conn.ping }).to eq("PONG")
  end

  it "gives Sidekiq's default pool sizes: 5 in a client, concurrency + 5 in a server" do
    expect(JobQueue.redis_pool.size).to eq(5)
  end

  it "loads the redis gem only when an app first asks (the gem's own work never needs it)" do
    script = <<~RUBY
      $LOAD_PATH.unshift(#{File.join(ServerProcess::ROOT, "lib").inspect})
      require "queue"
      JobQueue.configure { |c| c.redis = {url: #{TestRedis.url.inspect}} }
      class LazyWorker; include JobQueue::Worker; end
      LazyWorker.perform_async(1)
      before = defined?(::Redis) ? "loaded" : "not loaded"
      JobQueue.redis { |conn| conn.ping }
      puts [before, defined?(::Redis) ? "loaded" : "not loaded"].join(",")
    RUBY
    out = IO.popen([RbConfig.ruby, "-e", script], err: [:child, :out], &:read)
    expect(out).to eq("not loaded,loaded\n")
  end

  # Sidekiq 6.4.1 logs an error and exits(-127) when a namespace is set without redis-namespace; ours
  # raises at the call (the gem's own keys are prefixed by the engine and need no such gem).
  it "raises ArgumentError with a namespace and no redis-namespace gem, instead of touching unprefixed keys" do
    JobQueue.config.namespace = "app"
    expect { JobQueue.redis { |conn| conn.set("k", 1) } }.to raise_error(ArgumentError, /namespace "app:" is set.*redis-namespace/)
    expect(TestRedis.client.keys("*")).to be_empty
  end

  it "needs a block" do
    expect { JobQueue.redis }.to raise_error(ArgumentError, /needs a block/)
  end
end
