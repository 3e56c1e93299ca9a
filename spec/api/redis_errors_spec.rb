# frozen_string_literal: true

require "socket"
require "tmpdir"
require_relative "../apps/api_tls"

# Issue #10, acceptance 2: when Redis cannot be used, the push path (perform_async, through the engine)
# and `queue` startup say which Redis (its URL, password masked) and what to change. Each setup is a
# real redis-server of this spec's own on a private port, or a port where nothing listens.
RSpec.describe "Redis connection error messages" do
  before(:context) do
    @dir = Dir.mktmpdir("queue-redis-errors")
    @silent = TCPServer.new("127.0.0.1", 0) # see silent_port
    write_certificate(@dir)
    # A free port can be taken between choosing it and the server's bind (by another process, or as
    # a client connection's local port): then that server exits, and the three start again elsewhere.
    3.times do |attempt|
      break if start_servers

      stop_servers
      raise "redis-servers would not start on free ports" if attempt == 2
    end
  end

  after(:context) do
    @silent&.close
    stop_servers
    FileUtils.rm_rf(@dir) if @dir
  end

  def start_servers
    @ports = %i[password plain tls].zip(free_ports(3)).to_h
    @reaped = []
    common = ["--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", @dir]
    @pids = [
      spawn_redis("--port", @ports[:password].to_s, "--requirepass", "s3cret", *common),
      spawn_redis("--port", @ports[:plain].to_s, "--databases", "16", *common),
      spawn_redis("--port", "0", "--tls-port", @ports[:tls].to_s, "--tls-cert-file", "#{@dir}/cert.pem",
        "--tls-key-file", "#{@dir}/key.pem", "--tls-ca-cert-file", "#{@dir}/cert.pem", "--tls-auth-clients", "no", *common)
    ]
    wait_until("the redis-servers to listen (or one to fail)") { any_exited? || @ports.values.all? { |port| listening?(port) } }
    # Listening is not enough: each port must be our server's, so none of ours may have exited.
    !any_exited?
  end

  def any_exited?
    @pids.any? { |pid| @reaped.include?(pid) || (Process.waitpid(pid, Process::WNOHANG) && @reaped << pid) }
  end

  def stop_servers
    (@pids || []).each do |pid|
      next if @reaped.include?(pid)

      Process.kill("TERM", pid)
      Process.wait(pid)
    end
    @pids = []
  end

  def spawn_redis(*args)
    Process.spawn("redis-server", *args, out: File::NULL, err: File::NULL)
  end

  # Each setup: the URL the app configures, and what both the push and `queue` must print.
  def self.setups
    {
      "a refused port" => [
        ->(s) { "redis://:s3cret@127.0.0.1:#{s.refused_port}/0" },
        ->(s) { "Redis at redis://:****@127.0.0.1:#{s.refused_port}/0 refused the connection" },
        "is redis-server running there? Set REDIS_URL or config.redis = {url: ...}"
      ],
      "a requirepass server with no password" => [
        ->(s) { "redis://127.0.0.1:#{s.port(:password)}/0" },
        ->(s) { "Redis at redis://127.0.0.1:#{s.port(:password)}/0 requires a password (NOAUTH)" },
        "set config.redis = {password: ...} or put it in the URL"
      ],
      "a requirepass server with a wrong password" => [
        ->(s) { "redis://:wrong-one@127.0.0.1:#{s.port(:password)}/0" },
        ->(s) { "Redis at redis://:****@127.0.0.1:#{s.port(:password)}/0 rejected the password (WRONGPASS/invalid password)" },
        "check config.redis = {password: ...} or the password in the URL"
      ],
      "DB index 99 on a server with 16 databases" => [
        ->(s) { "redis://127.0.0.1:#{s.port(:plain)}/99" },
        ->(s) { "Redis at redis://127.0.0.1:#{s.port(:plain)}/99 has no database 99 (ERR DB index is out of range)" },
        "config.redis = {db: ...}"
      ],
      "a TLS server whose certificate the client does not trust" => [
        ->(s) { "rediss://localhost:#{s.port(:tls)}/0" },
        ->(s) { "TLS handshake with Redis at rediss://localhost:#{s.port(:tls)}/0 failed: certificate not trusted" },
        "set ssl_params ca_file (or SSL_CERT_FILE) to the CA certificate"
      ],
      "a port that accepts the connection and never answers" => [
        ->(s) { "redis://127.0.0.1:#{s.silent_port}/0" },
        ->(s) { "Redis at redis://127.0.0.1:#{s.silent_port}/0 did not answer in time" },
        "is the host reachable and the port right?"
      ],
      # A plain redis-server never answers a ClientHello (it waits for an inline command's newline):
      # without the engine's own bounded handshake first, the push and the server would hang.
      "rediss:// pointed at a plain (non-TLS) port" => [
        ->(s) { "rediss://127.0.0.1:#{s.port(:plain)}/0" },
        ->(s) { "TLS handshake with Redis at rediss://127.0.0.1:#{s.port(:plain)}/0 failed (no reply to a TLS handshake within 2s" },
        "does that port speak TLS (redis-server --tls-port)? Use redis:// for a plain port"
      ]
    }
  end

  def port(name)
    @ports.fetch(name)
  end

  def refused_port
    @refused_port ||= free_port
  end

  # A port whose kernel completes the TCP handshake (the listen backlog) but where nothing ever reads
  # or answers: a hung server, or a firewall that lets the connection in.
  def silent_port
    @silent.addr[1]
  end

  setups.each do |setup, (url, start, advice)|
    context "with #{setup}" do
      it "fails perform_async with a JobQueue::ConnectionError naming the masked URL and what to do" do
        JobQueue.configure { |c| c.redis = {url: url.call(self)} }
        expect { TlsWorker.perform_async("x") }.to raise_error(JobQueue::ConnectionError) { |e|
          expect(e.message).to start_with(start.call(self))
          expect(e.message).to include(advice)
          expect(e.message).not_to include("s3cret", "wrong-one")
        }
      end

      it "makes `queue` exit non-zero with the same message" do
        server = ServerProcess.new(app: "api_tls.rb", env: {"REDIS_URL" => url.call(self), "TLS_SPEC_DIR" => @dir}).start
        status = server.wait(timeout: 30)
        expect(status.exitstatus).not_to eq(0)
        expect(server.output).to include("queue: #{start.call(self)}")
        expect(server.output).to include(advice)
        expect(server.output).not_to include("s3cret", "wrong-one")
      end
    end
  end

  it "masks a password given as config.redis password:" do
    JobQueue.configure { |c| c.redis = {host: "127.0.0.1", port: port(:password), password: "wrong-one"} }
    expect { TlsWorker.perform_async("x") }.to raise_error(JobQueue::ConnectionError,
      "Redis at redis://:****@127.0.0.1:#{port(:password)}/0 rejected the password (WRONGPASS/invalid password): " \
      "check config.redis = {password: ...} or the password in the URL")
  end
end
