# frozen_string_literal: true

require "socket"
require "tmpdir"
require_relative "../apps/reliability_block"

# systemd `Type=notify`: the real server, with NOTIFY_SOCKET naming a datagram socket this spec binds
# (standing in for systemd, which this container does not run) and a short WATCHDOG_USEC. The spec
# awaits each message as it arrives; the blocking job (spec/apps/reliability_block.rb) keeps one thread
# busy until the spec sets `release`.
RSpec.describe "systemd notification (NOTIFY_SOCKET)" do
  around do |example|
    Dir.mktmpdir("qn-") do |dir| # short: a socket path has at most 107 bytes
      @socket_path = File.join(dir, "notify.sock")
      @manager = Socket.new(:UNIX, :DGRAM)
      @manager.bind(Socket.pack_sockaddr_un(@socket_path))
      @messages = []
      example.run
    ensure
      @manager&.close
    end
  end

  # Receives datagrams until one satisfies the block; returns the messages received before it.
  def await_message(description, timeout: 30)
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + timeout
    before = []
    loop do
      left = deadline - Process.clock_gettime(Process::CLOCK_MONOTONIC)
      raise RSpec::Expectations::ExpectationNotMetError, "no #{description} within #{timeout}s; got #{before.inspect}" if left <= 0
      next unless @manager.wait_readable(left)

      message = @manager.recv(4096)
      @messages << message
      return before if yield(message)

      before << message
    end
  end

  def notified_env(extra = {})
    {"NOTIFY_SOCKET" => @socket_path, "WATCHDOG_USEC" => "200000"}.merge(extra)
  end

  it "says READY once registered with every thread fetching, pings the watchdog, reports status, and STOPPING on TERM" do
    redis = TestRedis.client
    ReliabilityBlockingWorker.perform_async("held")
    server = start_server(app: "reliability_block.rb", args: ["-c", "2", "-t", "10"], env: notified_env)

    early = await_message("READY=1") { |m| m == "READY=1" }
    expect(early).to all(satisfy { |m| m == "WATCHDOG=1" || m.start_with?("STATUS=starting") })
    expect(redis.smembers("processes").size).to eq(1) # registered and beaten before READY

    wait_until("the job to start") { redis.llen("started") == 1 }
    await_message("the busy status") { |m| m == "STATUS=processing: 1 of 2 threads busy" }
    3.times { await_message("a WATCHDOG=1 ping") { |m| m == "WATCHDOG=1" } }

    server.signal("TSTP")
    await_message("the quiet status") { |m| m == "STATUS=quiet (taking no new jobs): 1 of 2 threads busy" }

    server.signal("TERM")
    await_message("STOPPING=1") { |m| m == "STOPPING=1" }
    await_message("the stopping status") { |m| m == "STATUS=stopping: waiting for 1 of 2 threads" }
    await_message("a WATCHDOG=1 ping while the job drains") { |m| m == "WATCHDOG=1" }
    redis.set("release", "1")

    expect(server.wait.exitstatus).to eq(0)
    expect(redis.llen("finished")).to eq(1)
    expect(@messages.count("READY=1")).to eq(1)
  end

  it "refuses to start with a NOTIFY_SOCKET it cannot use, naming it" do
    server = start_server(app: "basic.rb", env: notified_env("NOTIFY_SOCKET" => "notify.sock"))

    expect(server.wait.exitstatus).to eq(1)
    expect(server.output).to include('NOTIFY_SOCKET="notify.sock" is not usable')
  end
end
