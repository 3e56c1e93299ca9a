# frozen_string_literal: true

require "openssl"
require "socket"
require "tmpdir"
require "stringio"
require_relative "../apps/api_tls"

# rediss:// against a redis-server that only speaks TLS, with a self-signed certificate made here.
RSpec.describe "rediss:// (TLS)" do
  around do |example|
    Dir.mktmpdir("queue-tls") do |dir|
      @dir = dir
      @port = free_port
      write_certificate(dir)
      @redis = Process.spawn("redis-server", "--port", "0", "--tls-port", @port.to_s,
        "--tls-cert-file", "#{dir}/cert.pem", "--tls-key-file", "#{dir}/key.pem",
        "--tls-ca-cert-file", "#{dir}/cert.pem", "--tls-auth-clients", "no",
        "--save", "", "--appendonly", "no", "--dir", dir, out: "#{dir}/redis.log", err: [:child, :out])
      wait_until("the TLS port to listen") { listening?(@port) }
      example.run
    ensure
      @server&.ensure_stopped
      Process.kill("TERM", @redis) if @redis
      Process.wait(@redis) if @redis
    end
  end

  it "pushes over TLS when the certificate is trusted, and a server runs the job over TLS" do
    ENV["SSL_CERT_FILE"] = "#{@dir}/cert.pem"
    JobQueue.configure { |c| c.redis = {url: "rediss://localhost:#{@port}/0"} }
    expect(JobQueue.engine.ping).to be(true)
    TlsWorker.perform_async("over tls")

    @server = ServerProcess.new(app: "api_tls.rb", env: {
      "REDIS_URL" => "rediss://localhost:#{@port}/0",
      "SSL_CERT_FILE" => "#{@dir}/cert.pem", "TLS_SPEC_DIR" => @dir
    }).start
    ran = wait_until("the job to run over TLS") { File.exist?("#{@dir}/ran") && File.read("#{@dir}/ran") }
    expect(ran).to eq("over tls")
    expect(@server.stop.exitstatus).to eq(0)
  ensure
    ENV.delete("SSL_CERT_FILE")
  end

  it "refuses an untrusted certificate with a connection error" do
    JobQueue.configure { |c| c.redis = {url: "rediss://localhost:#{@port}/0"} }
    expect { JobQueue.engine.ping }.to raise_error(JobQueue::ConnectionError)
  end

  # Sidekiq 6.4.1 hands ssl_params to redis-rb. The engine honours verify_mode (VERIFY_NONE becomes the
  # URL's #insecure); JobQueue.redis's connections take them all.
  it "skips verification with ssl_params verify_mode: VERIFY_NONE, in the engine and in JobQueue.redis" do
    JobQueue.configure do |c|
      c.redis = {url: "rediss://localhost:#{@port}/0", ssl_params: {verify_mode: OpenSSL::SSL::VERIFY_NONE}}
    end
    expect(JobQueue.config.redis_url).to eq("rediss://localhost:#{@port}/0#insecure")
    expect(JobQueue.engine.ping).to be(true)
    expect(JobQueue.redis { |conn| conn.ping }).to eq("PONG")
  end

  it "trusts ssl_params ca_file in the engine and in JobQueue.redis, with no warning" do
    log = StringIO.new
    JobQueue.config.logger = Logger.new(log)
    JobQueue.configure { |c| c.redis = {url: "rediss://localhost:#{@port}/0", ssl_params: {ca_file: "#{@dir}/cert.pem"}} }
    expect(log.string).not_to include("ca_file")
    expect(JobQueue.redis { |conn| conn.ping }).to eq("PONG")
    expect(JobQueue.engine.ping).to be(true)
    TlsWorker.perform_async("trusted by ca_file")
    expect(TestRedis.client.llen("queue:default")).to eq(0) # the job went to the TLS server
  end

  it "still warns about the ssl_params the engine does not use (a client certificate)" do
    log = StringIO.new
    JobQueue.config.logger = Logger.new(log)
    JobQueue.configure { |c| c.redis = {url: "rediss://localhost:#{@port}/0", ssl_params: {ca_file: "#{@dir}/cert.pem", cert: "x"}} }
    expect(log.string).to include("redis ssl_params cert: applies to JobQueue.redis connections only")
  end

  it "names an unreadable ca_file" do
    JobQueue.configure { |c| c.redis = {url: "rediss://localhost:#{@port}/0", ssl_params: {ca_file: "#{@dir}/missing.pem"}} }
    expect { JobQueue.engine }.to raise_error(ArgumentError, %r{cannot read ssl_params ca_file #{@dir}/missing.pem})
  end
end
