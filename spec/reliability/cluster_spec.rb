# frozen_string_literal: true

require "socket"
require "tmpdir"
require "queue/api"
require_relative "support"
require_relative "../apps/cluster"

# `queue cluster`: real parent and child processes on the suite's Redis. Jobs record the pid that ran
# them (spec/apps/cluster.rb); blocking ones wait for the `release` key, so the spec decides when they
# end.
RSpec.describe "queue cluster" do
  include_context "with server processes"

  def start_cluster(*args, env: {})
    server = ServerProcess.new(kind: :cluster, app: "cluster.rb", args: args, env: env).start
    servers << server
    server
  end

  # The registered processes (ProcessSet), once `count` are there, by tag.
  def processes(count, timeout: 30)
    wait_until("#{count} processes in ProcessSet", timeout: timeout) do
      set = JobQueue::ProcessSet.new.to_a
      set.size == count && set
    end.sort_by(&:tag)
  end

  def children_of(pid)
    File.read("/proc/#{pid}/task/#{pid}/children").split.map(&:to_i)
  rescue Errno::ENOENT
    []
  end

  def pids_of(key, label = nil)
    list_of(key).select { |j| label.nil? || j["label"] == label }.map { |j| j["pid"] }
  end

  it "runs one process per group, each a full process in ProcessSet with its queues and its index in the tag" do
    cluster = start_cluster("-c", "2", "-g", "app", "a,b", "c", "*")
    set = processes(3)

    expect(set.map(&:tag)).to eq(%w[app-0 app-1 app-2])
    expect(set.map(&:queues)).to eq([%w[a b], %w[c], %w[default]])
    expect(set.map { |p| p["pid"] }).to match_array(children_of(cluster.pid))
    expect(set.map(&:identity).uniq.size).to eq(3)

    # Each child serves its own queues only.
    jids = %w[a b c default].to_h { |queue| [queue, ClusterJobWorker.set(queue: queue).perform_async(queue, 0)] }
    wait_until("the 4 jobs to run") { redis.llen("finished") == 4 }
    by_pid = set.to_h { |p| [p["pid"], p.queues] }
    list_of("finished").each { |job| expect(by_pid.fetch(job["pid"])).to include(job["label"]) }
    expect(jids.size).to eq(4)

    expect(cluster.stop.exitstatus).to eq(0)
  end

  it "runs -n N processes of the same queues (a swarm)" do
    start_cluster("-c", "1", "-n", "3", "-g", "swarm", "a")
    set = processes(3)

    expect(set.map(&:tag)).to eq(%w[swarm-0 swarm-1 swarm-2])
    expect(set.map(&:queues)).to all(eq(["a"]))
  end

  it "restarts a child killed with SIGKILL within 5 s, and the dead child's running jobs are recovered" do
    cluster = start_cluster("-c", "2", "-t", "5", "a", "b")
    victim, other = processes(2)
    jids = Array.new(2) { |i| ClusterJobWorker.set(queue: "a").perform_async("held #{i}") }
    wait_until("both jobs to run in child 0") { pids_of("started").count(victim["pid"]) == 2 }

    Process.kill("KILL", victim["pid"])
    killed_at = monotonic
    replacement = wait_until("a new child in ProcessSet", timeout: 5) do
      JobQueue::ProcessSet.new.find { |p| p.queues == ["a"] && p["pid"] != victim["pid"] }
    end
    report("  replacement child registered #{(monotonic - killed_at).round(2)} s after the kill")
    expect(replacement.tag).to eq(victim.tag)
    expect(children_of(cluster.pid)).to contain_exactly(replacement["pid"], other["pid"])
    expect(cluster.output).to match(/child 0 \(pid #{victim["pid"]}, queues a\) was killed by SIGKILL after [\d.]+s; restarting it in 0.5s/)

    # The liveness beat of a live process puts the dead one's jobs back; the new child runs them.
    wait_until("the held jobs to run again", timeout: 25) { pids_of("started").count(replacement["pid"]) == 2 }
    report("  its 2 running jobs ran again #{(monotonic - killed_at).round(1)} s after the kill")
    redis.set("release", "1")
    wait_until("both to finish") { redis.llen("finished") == 2 }
    expect(list_of("finished").map { |j| j["jid"] }).to match_array(jids)
    expect(working_lists).to all(satisfy { |key| !key.include?(victim.identity) })
    expect(cluster.stop.exitstatus).to eq(0)
  end

  it "on TERM has every child finish its running jobs within -t, and exits 0" do
    cluster = start_cluster("-c", "2", "-t", "10", "a", "b")
    set = processes(2)
    jids = %w[a a b b].map.with_index { |queue, i| ClusterJobWorker.set(queue: queue).perform_async("#{queue} #{i}") }
    wait_until("4 jobs to run") { redis.llen("started") == 4 }
    expect(pids_of("started").uniq).to match_array(set.map { |p| p["pid"] })

    cluster.signal("TERM")
    sent = monotonic
    wait_until("both children to begin their shutdown") { cluster.output.scan("shutting down (timeout 10.0s)").size == 2 }
    late = ClusterJobWorker.set(queue: "a").perform_async("late", 0) # taken by nobody: every child is quiet
    redis.set("release", "1")
    status = cluster.wait(timeout: 15)
    took = monotonic - sent
    report("  cluster stopped #{took.round(2)} s after TERM")

    expect(status.exitstatus).to eq(0)
    expect(took).to be < 10
    expect(list_of("finished").map { |j| j["jid"] }).to match_array(jids)
    expect(pids_of("started").size).to eq(4) # each ran once, none was put back and run again
    expect(redis.lrange("queue:a", 0, -1).map { |raw| JSON.parse(raw)["jid"] }).to eq([late])
    expect(working_lists).to be_empty
    expect(redis.smembers("processes")).to be_empty
    expect(cluster.output.scan(/child \d \(pid \d+, queues \w\) exited with status 0/).size).to eq(2)
    expect(children_of(cluster.pid)).to be_empty
  end

  it "replaces a child whose RSS passes --max-memory after its running jobs finish, losing no job" do
    cluster = start_cluster("-c", "2", "-t", "10", "--max-memory", "150M", "--memory-check-interval", "0.2", "a")
    (first,) = processes(1)
    held = ClusterJobWorker.set(queue: "a").perform_async("held")
    wait_until("the held job to run") { redis.llen("started") == 1 }
    hog = ClusterHogWorker.set(queue: "a").perform_async(200)

    wait_until("the memory limit to be noticed") { cluster.output.include?("past --max-memory 150 MB") }
    expect(cluster.output).to match(/child 0 \(pid #{first["pid"]}, queues a\) uses \d+ MB, past --max-memory 150 MB: quieting it/)
    queued = ClusterJobWorker.set(queue: "a").perform_async("after", 0) # waits for the replacement
    expect(pids_of("started")).to eq([first["pid"]])
    redis.set("release", "1")

    replacement = wait_until("the replacement to run the queued job") do
      job = list_of("finished").find { |j| j["jid"] == queued }
      job && job["pid"]
    end
    expect(replacement).not_to eq(first["pid"])
    finished = list_of("finished").to_h { |j| [j["jid"], j["pid"]] }
    expect(finished).to eq(held => first["pid"], hog => first["pid"], queued => replacement)
    expect(cluster.output).to include("child 0 (pid #{first["pid"]}, queues a) exited with status 0 after passing the memory limit; starting its replacement")
    expect(processes(1).map { |p| p["pid"] }).to eq([replacement])
    expect(cluster.stop.exitstatus).to eq(0)
  end

  it "has its children stop gracefully, finishing their running jobs, when the parent is killed" do
    cluster = start_cluster("-c", "2", "-t", "10", "a", "b")
    children = processes(2).map { |p| p["pid"] }
    jid = ClusterJobWorker.set(queue: "a").perform_async("held")
    wait_until("the job to run") { redis.llen("started") == 1 }

    Process.kill("KILL", cluster.pid)
    wait_until("both children to say the parent is gone", timeout: 10) do
      cluster.output.scan("the queue cluster parent (pid #{cluster.pid}) is gone: stopping").size == 2
    end
    redis.set("release", "1")
    wait_until("both children to deregister", timeout: 15) { redis.smembers("processes").empty? }

    expect(list_of("finished").map { |j| j["jid"] }).to eq([jid])
    expect(working_lists).to be_empty
    children.each { |pid| wait_until("child #{pid} to exit") { !File.exist?("/proc/#{pid}") || File.read("/proc/#{pid}/stat").split(") ").last.start_with?("Z") } }
  end

  describe "fork safety" do
    # TCP, so each command MONITOR shows names the client's port, which names its socket in /proc.
    let(:env) { {"REDIS_URL" => TestRedis.tcp_url, "CLUSTER_PUSH_AT_BOOT" => "1"} }
    let(:port) { Integer(TestRedis.tcp_url[/:(\d+)/, 1]) }

    # Every command Redis runs from now on, as MONITOR prints it ("<time> [0 127.0.0.1:<port>] ...").
    def monitor
      lines = []
      conn = Redis.new(path: TestRedis.socket)
      thread = Thread.new { conn.monitor { |line| lines << line } }
      wait_until("MONITOR to listen") { redis.ping && lines.any? { |l| l.include?('"ping"') } }
      @stop_monitor = -> { thread.kill.join && conn.close }
      lines
    end

    after { @stop_monitor&.call }

    # Local port => socket inode, of every TCP connection to the test Redis.
    def redis_sockets
      %w[/proc/net/tcp /proc/net/tcp6].flat_map { |file| File.readlines(file).drop(1) }.each_with_object({}) do |line, map|
        fields = line.split
        local, remote, inode = fields[1], fields[2], fields[9]
        map[local.split(":").last.to_i(16)] = inode if remote.split(":").last.to_i(16) == port
      end
    end

    def socket_inodes(pid)
      Dir.glob("/proc/#{pid}/fd/*").filter_map { |fd| File.readlink(fd)[/\Asocket:\[(\d+)\]\z/, 1] rescue nil } # rubocop:disable Style/RescueModifier
    end

    # [time, client port, line] of each monitored command over TCP.
    def commands(lines)
      lines.filter_map do |line|
        match = /\A(\d+\.\d+) \[\d+ [\d.]+:(\d+)\]/.match(line)
        match && [match[1].to_f, match[2].to_i, line]
      end
    end

    it "a child never uses a connection opened before the fork, and the parent runs no engine thread" do
      lines = monitor
      cluster = start_cluster("-c", "2", "boot,chain", "chained", env: env)
      children = processes(2).map { |p| p["pid"] }
      wait_until("the jobs pushed at boot and at each child's startup to run") do
        pids_of("finished", "pushed by the parent").size == 1 && pids_of("finished", "pushed by a child at startup").size == 2
      end
      # Children push through their own connections: each chain job pushes a job for the other child.
      10.times { |i| ClusterChainWorker.set(queue: "chain").perform_async("chain #{i}") }
      wait_until("the chained jobs to run") { redis.llen("finished") == 23 }
      chained = list_of("finished").select { |j| j["label"].start_with?("chain ") }.map { |j| j["pid"] }
      expect(chained).to eq([children[1]] * 10)

      inodes = redis_sockets
      parent_inodes = socket_inodes(cluster.pid)
      parent_ports = inodes.select { |_, inode| parent_inodes.include?(inode) }.keys
      own_ports = children.to_h { |pid| [pid, inodes.select { |_, inode| socket_inodes(pid).include?(inode) && !parent_inodes.include?(inode) }.keys] }
      sent = commands(lines.dup)

      # The parent's connection (dialled for its boot push, still open in the parent and, inherited,
      # in each child) carried that push and nothing after any child's first command.
      from_parent = sent.select { |_, p, _| parent_ports.include?(p) }
      expect(from_parent.map(&:last).grep(/"LPUSH" "queue:boot" .*pushed by the parent/).size).to eq(1)
      first_child_command = sent.select { |_, p, _| own_ports.values.flatten.include?(p) }.map(&:first).min
      expect(from_parent.map(&:first).max).to be < first_child_command
      # Each child's main thread (the forking thread's copy, with the parent's per-thread connections
      # in its memory) pushed at startup over a connection of its own.
      startup = sent.select { |_, _, line| line.include?('"LPUSH" "queue:boot"') && line.include?("pushed by a child at startup") }.map { |_, p, _| p }
      expect(startup.size).to eq(2)
      expect(startup.map { |p| own_ports.find { |_, ports| ports.include?(p) }&.first }).to match_array(children)

      threads = Dir.glob("/proc/#{cluster.pid}/task/*/comm").map { |file| File.read(file).strip }
      expect(threads.size).to eq(1), "the parent runs threads: #{threads.inspect}"
      expect(cluster.stop.exitstatus).to eq(0)
    end
  end

  describe "under systemd (NOTIFY_SOCKET)" do
    around do |example|
      Dir.mktmpdir("qn-") do |dir|
        @socket_path = File.join(dir, "notify.sock")
        @manager = Socket.new(:UNIX, :DGRAM)
        @manager.bind(Socket.pack_sockaddr_un(@socket_path))
        example.run
      ensure
        @manager&.close
      end
    end

    def messages_until(description, timeout: 30)
      seen = []
      wait_until(description, timeout: timeout) do
        seen << @manager.recv(4096) while @manager.wait_readable(0)
        yield(seen)
      end
      seen
    end

    it "says READY=1 once every child is ready, pings the watchdog for the group, and STOPPING=1 on TERM" do
      env = {"NOTIFY_SOCKET" => @socket_path, "WATCHDOG_USEC" => "400000"}
      cluster = start_cluster("-c", "2", "a", "b", env: env)
      seen = messages_until("READY=1") { |m| m.include?("READY=1") }
      expect(JobQueue::ProcessSet.new.size).to eq(2) # both registered before the group is ready
      expect(seen).to include("STATUS=2 of 2 processes ready")
      seen = messages_until("3 watchdog pings") { |m| m.count("WATCHDOG=1") >= 3 }
      # Only the parent speaks to the manager: the children's engines speak to the parent.
      expect(seen.grep(/STATUS=(processing|starting)/)).to be_empty

      cluster.signal("TERM")
      messages_until("STOPPING=1") { |m| m.include?("STOPPING=1") }
      expect(cluster.wait.exitstatus).to eq(0)
    end
  end
end
