# frozen_string_literal: true

require "tmpdir"
require "fileutils"
require "queue/testing/redis_server"

# A Redis Sentinel deployment for one example: a redis-server primary, a replica (`replicaof`), and
# three redis-sentinels monitoring the primary as "mymaster", each on a free loopback port, in a temp
# dir (sentinel rewrites its configuration file there). Started and stopped by pid.
class SentinelServers
  MASTER = "mymaster"

  attr_reader :primary_port, :replica_port, :sentinel_ports, :dir

  # `sentinel_password`: the sentinels' own `requirepass` (not the master's). `down_after_ms`: how
  # long a silent master takes to be judged down (small for a kill -9 to fail over quickly).
  def initialize(sentinel_password: nil, down_after_ms: 1000)
    @sentinel_password = sentinel_password
    @down_after_ms = down_after_ms
    @named = {}
    @dir = Dir.mktmpdir("queue-sentinel")
    @primary_port, @replica_port, *@sentinel_ports = Array.new(5) { JobQueue::Testing::RedisServer.free_port }
    @pids = []
  end

  def start
    @primary_port = up("primary", @primary_port) { |port| server("primary", port) }
    wait("the primary") { role(@primary_port) == "master" }
    @replica_port = up("replica", @replica_port) { |port| server("replica", port, "--replicaof", "127.0.0.1", @primary_port.to_s) }
    wait("the replica in sync") { client(@replica_port) { |c| c.info("replication")["master_link_status"] == "up" } }
    @sentinel_ports = @sentinel_ports.each_with_index.map { |port, i| up("sentinel-#{i}", port) { |p| sentinel(i, p) } }
    @sentinel_ports.each do |port|
      wait("sentinel #{port} to see the replica") { sentinel_client(port) { |c| c.call(["sentinel", "replicas", MASTER]).any? } }
    end
    self
  rescue StandardError
    stop # a start that fails leaves nothing running: an `after { set.stop }` never sees this set
    raise
  end

  def stop
    @pids.each do |pid|
      Process.kill("KILL", pid)
      Process.wait(pid)
    rescue Errno::ESRCH, Errno::ECHILD
      nil
    end
    @pids.clear
    FileUtils.rm_rf(@dir)
  end

  # The sentinels as config.redis takes them.
  def sentinels
    @sentinel_ports.map { |port| {host: "127.0.0.1", port: port} }
  end

  # Starts a failover (`SENTINEL FAILOVER`, retried while the sentinels do not yet judge the replica
  # fit) and returns the monotonic time at which the replica answered ROLE as master.
  def failover!
    wait("SENTINEL FAILOVER to start") do
      sentinel_client(@sentinel_ports.first) { |c| c.call(["sentinel", "failover", MASTER]) == "OK" }
    end
    wait("the replica promoted", interval: 0.005) { role(@replica_port) == "master" }
    Process.clock_gettime(Process::CLOCK_MONOTONIC)
  end

  # The primary's crash: SIGKILL, no cleanup.
  def kill_primary!
    pid = @named.fetch("primary")
    Process.kill("KILL", pid)
    Process.wait(pid)
    @pids.delete(pid)
  end

  # Waits (after #kill_primary!) until the sentinels have promoted the replica: it answers ROLE as
  # master. Returns the monotonic time it was seen.
  def await_promotion(timeout: 60)
    wait("the replica promoted", timeout: timeout, interval: 0.005) { role(@replica_port) == "master" }
    Process.clock_gettime(Process::CLOCK_MONOTONIC)
  end

  # Starts the killed primary again on its port, as a restarted host would: a master with an empty
  # dataset that the sentinels turn into the new master's replica.
  def restart_primary!
    pid = server("primary", @primary_port)
    @pids << pid
    @named["primary"] = pid
    wait("the old primary back") { client(@primary_port) { |c| c.ping == "PONG" } }
  end

  # Waits until the old primary replicates from the promoted one, in sync.
  def await_rejoined(timeout: 60)
    wait("the old primary to rejoin as a replica", timeout: timeout) do
      client(@primary_port) { |c| c.info("replication").values_at("role", "master_port", "master_link_status") } == ["slave", @replica_port.to_s, "up"]
    end
  end

  def role(port)
    client(port) { |c| c.call(["role"]).first }
  end

  # A plain connection to one server, closed after the block; nil when it cannot be reached.
  def client(port, password: nil)
    conn = Redis.new(host: "127.0.0.1", port: port, password: password, timeout: 2, reconnect_attempts: 0)
    yield conn
  rescue Redis::BaseError
    nil
  ensure
    conn&.close
  end

  def sentinel_client(port, &block)
    client(port, password: @sentinel_password, &block)
  end

  private

  # Starts a process with the block on `port` and waits until it answers PING. A free port can be
  # taken by another connection's local end before the process binds it; a process that exits
  # (its bind failed) is started again on another port. Returns the port it listens on.
  def up(name, port, tries: 5)
    tries.times do
      pid = yield port
      @pids << pid
      @named[name] = pid
      deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 10
      until Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline
        return port if client(port, password: name.start_with?("sentinel") ? @sentinel_password : nil) { |c| c.ping == "PONG" }
        break if Process.waitpid(pid, Process::WNOHANG)

        sleep 0.02
      end
      port = JobQueue::Testing::RedisServer.free_port
    end
    raise "#{name} did not start in #{tries} tries (#{@dir}):\n#{logs}"
  end

  # The last lines of every process's log, for a failure's message (the dir goes with #stop).
  def logs
    Dir[File.join(@dir, "**", "*log")].map { |f| "--- #{f}\n#{File.readlines(f).last(15).join}" }.join
  end

  def server(name, port, *args)
    dir = File.join(@dir, name)
    FileUtils.mkdir_p(dir)
    Process.spawn("redis-server", "--port", port.to_s, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
      "--dir", dir, *args, out: File.join(dir, "log"), err: [:child, :out])
  end

  def sentinel(index, port)
    conf = File.join(@dir, "sentinel-#{index}.conf")
    File.write(conf, <<~CONF)
      port #{port}
      bind 127.0.0.1
      daemonize no
      dir #{@dir}
      sentinel monitor #{MASTER} 127.0.0.1 #{@primary_port} 2
      sentinel down-after-milliseconds #{MASTER} #{@down_after_ms}
      sentinel failover-timeout #{MASTER} 5000
      #{"requirepass #{@sentinel_password}" if @sentinel_password}
    CONF
    Process.spawn("redis-sentinel", conf, out: File.join(@dir, "sentinel-#{index}.log"), err: [:child, :out])
  end

  def wait(what, timeout: 30, interval: 0.02)
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + timeout
    until yield
      raise "timed out after #{timeout}s waiting for #{what} (#{@dir}):\n#{logs}" if Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline

      sleep interval
    end
  end
end
