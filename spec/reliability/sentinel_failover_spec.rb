# frozen_string_literal: true

require "json"
require "securerandom"
require "rack/mock"
require "queue/web"
require_relative "../apps/failover"

# Issue #22, acceptance 1: failover under load with real Sentinel (a primary, a replica, three
# sentinels; spec/support/sentinel_servers.rb). A `-c 10` server runs 3,000 jobs of a few ms while
# another process pushes throughout (spec/apps/failover_pusher.rb), and the master fails over a
# third of the way in: by `SENTINEL FAILOVER`, or by `kill -9` of the primary (restarted afterwards,
# as a host would be, to rejoin as the new master's replica). Runs are recorded in a file, outside
# Redis, so a failover cannot lose their record.
#
# With `wait_replicas: 1` every push that returned ran, no push ran twice because it was sent twice,
# and duplicates from re-fetching are at most the concurrency. Without it the same runs print how
# many acknowledged pushes were lost (the window README "Redis Sentinel" states). Each run prints
# pushes, failed pushes, runs, lost, duplicates and the seconds from the promotion to the first run
# of a job that only the new master had. FAILOVER_JOB_MS (3 unless set) makes the jobs longer: at 40
# a backlog builds, the runs without wait_replicas lose pushes, and re-fetched jobs run twice more
# often than the concurrency (README "Redis Sentinel" has the figures), so the duplicate bound fails.
RSpec.describe "Redis Sentinel failover under load" do
  def jobs = 3_000
  def concurrency = 10
  def pusher = File.expand_path("../apps/failover_pusher.rb", __dir__)
  def lib = File.expand_path("../../lib", __dir__)

  # One run: what the pushes and the jobs did.
  outcome = Struct.new(:acked, :failed, :failed_ran, :runs, :lost, :duplicates, :first_job_s, :redone_jids, :stranded, keyword_init: true)
  define_method(:outcome) { outcome }

  around do |example|
    @dir = Dir.mktmpdir("queue-failover")
    example.run
  ensure
    stop_pid(@pusher)
    @server&.ensure_stopped
    JobQueue.redis_pool.shutdown
    @set&.stop
    FileUtils.rm_rf(@dir)
  end

  after do |example|
    warn("--- server log:\n#{@server.output.lines.last(40).join}") if example.exception && @server
  end

  def stop_pid(pid)
    return unless pid

    Process.kill("KILL", pid)
    Process.wait(pid)
  rescue Errno::ESRCH, Errno::ECHILD
    nil
  end

  def on(port, &block)
    @set.client(port, &block)
  end

  def runs_file = File.join(@dir, "runs")
  def pushes_file = File.join(@dir, "pushes")

  # [[seq, jid, time, pid], ...] for every run so far.
  def runs
    return [] unless File.exist?(runs_file)

    File.readlines(runs_file).filter_map do |line|
      # The last line may be read while it is being written: only whole lines count.
      next unless line.end_with?("\n")

      seq, jid, time, pid = line.split
      [Integer(seq), jid, Float(time), Integer(pid)]
    end
  end

  # ok: {seq => [jid, time]} of the pushes that returned; failed: [[seq, class, time], ...].
  def pushes
    ok = {}
    failed = []
    (File.exist?(pushes_file) ? File.readlines(pushes_file) : []).each do |line|
      # The last line may be read while it is being written (a reader can see part of a write):
      # only whole lines count.
      next unless line.end_with?("\n")

      kind, seq, third, time = line.split(" ", 5)

      kind == "ok" ? ok[Integer(seq)] = [third, Float(time)] : failed << [Integer(seq), third, Float(time)]
    end
    [ok, failed]
  end

  def redis_options(wait)
    options = {url: "redis://mymaster/0", sentinels: @set.sentinels, role: :master}
    wait ? options.merge(wait_replicas: 1, wait_timeout: 500) : options
  end

  def env(wait)
    {
      "SENTINELS" => @set.sentinel_ports.map { |p| "127.0.0.1:#{p}" }.join(","), "REDIS_URL" => nil,
      "RUNS" => runs_file, "WAIT_REPLICAS" => (wait ? "1" : nil), "WAIT_TIMEOUT" => (wait ? "500" : nil)
    }
  end

  def dashboard_queues
    response = Rack::MockRequest.new(JobQueue::Web.new(session_secret: "failover" * 8)).get("/queues")
    response.status == 200 ? response.body : nil
  rescue JobQueue::Error
    nil # the dashboard's engine connection was on the old master: this request failed, the next redials
  end

  def redis_master
    JobQueue.redis { |c| c.role.first.then { |role| [c.connection[:port], role] } }
  rescue Redis::BaseConnectionError, Redis::CommandError
    nil
  end

  # A job only the new master has: pushed there directly, right after the promotion.
  def push_marker(port)
    now = Time.now.to_f
    job = {"class" => "FailoverJob", "args" => [0], "queue" => "default", "retry" => true,
           "jid" => SecureRandom.hex(12), "created_at" => now, "enqueued_at" => now}
    on(port) do |c|
      c.sadd("queues", ["default", "failover-probe"])
      c.lpush("queue:failover-probe", JSON.generate(job.merge("queue" => "failover-probe")))
      c.lpush("queue:default", JSON.generate(job))
    end
  end

  def run_failover(kind, wait:)
    @set = SentinelServers.new(down_after_ms: 500).start
    JobQueue.configure { |c| c.redis = redis_options(wait) }
    @server = ServerProcess.new(app: "failover.rb", args: ["-c", concurrency.to_s, "-q", "default"], env: env(wait)).start
    identity = wait_until("the server's heartbeat on the primary") do
      on(@set.primary_port) { |c| c.smembers("processes") }&.find { |i| i.split(":")[-2] == @server.pid.to_s }
    end
    # The dashboard and JobQueue.redis of this process are connected to the old master first.
    expect(dashboard_queues).to be_a(String)
    expect(redis_master).to eq([@set.primary_port, "master"])

    pusher_env = env(wait).merge("TARGET" => jobs.to_s, "OUT" => pushes_file, "STOP_FILE" => File.join(@dir, "stop"))
    @pusher = Process.spawn(pusher_env, RbConfig.ruby, "-I", lib, pusher, out: File.join(@dir, "pusher.log"), err: [:child, :out])
    wait_until("a third of the pushes", timeout: 60) { pushes.first.size >= jobs / 3 }

    promoted =
      if kind == :kill
        @set.kill_primary!
        @set.await_promotion
      else
        @set.failover!
      end
    promoted_at = Time.now.to_f - (Process.clock_gettime(Process::CLOCK_MONOTONIC) - promoted)
    push_marker(@set.replica_port)

    # The dashboard and JobQueue.redis follow the new master (the probe queue is only there).
    wait_until("the dashboard on the new master", timeout: 60, interval: 0.1) { dashboard_queues&.include?("failover-probe") }
    wait_until("JobQueue.redis on the new master", timeout: 60, interval: 0.1) { redis_master == [@set.replica_port, "master"] }

    @set.restart_primary! if kind == :kill
    wait_until("the pusher to finish", timeout: 180) { Process.waitpid(@pusher, Process::WNOHANG) }
    @pusher = nil

    acked, failed = pushes
    if wait
      wait_until("every acknowledged push to run", timeout: 60) { (acked.keys - runs.map(&:first)).empty? }
    else
      wait_until("the queue to drain on the new master", timeout: 60) do
        runs.any? { |r| r[0] == acked.keys.max } && on(@set.replica_port) { |c| c.llen("queue:default") }.zero?
      end
    end
    expect(@server.running?).to be(true)
    # The same process and identity, beating on the new master: never restarted.
    since = Time.now.to_f
    wait_until("the server's heartbeat on the new master") { on(@set.replica_port) { |c| c.hget(identity, "beat") }.to_f > since }

    # Jobs that finished but whose acknowledgement went to the old master after the promotion are
    # still in the server's working lists on the new master (put back when it stops): counted.
    stranded = on(@set.replica_port) do |c|
      c.scan_each(match: "jq:working:*").sum { |key| c.type(key) == "list" ? c.llen(key) : 0 }
    end

    all = runs
    marker = all.find { |r| r[0].zero? } or raise "the job pushed to the new master never ran"
    ran = all.reject { |r| r[0].zero? }
    by_seq = ran.group_by(&:first)
    result = outcome.new(
      acked: acked.size, failed: failed, failed_ran: failed.count { |f| by_seq.key?(f[0]) }, runs: ran.size,
      lost: (acked.keys - by_seq.keys).size,
      duplicates: ran.size - by_seq.size,
      first_job_s: marker[2] - promoted_at,
      stranded: stranded,
      redone_jids: acked.count { |seq, (jid, _)| by_seq.fetch(seq, []).any? { |r| r[1] != jid } }
    )
    report(kind, wait, result)
    result
  end

  def report(kind, wait, o)
    failed = o.failed.map { |f| f[1].split("::").last }.tally.map { |k, n| "#{n} #{k}" }.join(", ")
    warn(format("Sentinel %s, %s: pushes %d, failed pushes %d (%s; %d of them ran), runs %d, lost %d, " \
      "duplicates %d, promotion to the first job on the new master %.2f s, finished jobs left in working lists %d",
      kind == :kill ? "kill -9 of the primary" : "SENTINEL FAILOVER", wait ? "wait_replicas: 1" : "no wait_replicas",
      o.acked, o.failed.size, failed.empty? ? "none" : failed, o.failed_ran, o.runs, o.lost, o.duplicates, o.first_job_s, o.stranded))
  end

  def expect_safe(o)
    expect(o.lost).to eq(0)
    expect(o.redone_jids).to eq(0)
    expect(o.duplicates).to be <= concurrency
    expect(o.first_job_s).to be < 30
  end

  context "with wait_replicas: 1" do
    it "loses no acknowledged push across SENTINEL FAILOVER, and runs none twice beyond re-fetches" do
      expect_safe(run_failover(:failover, wait: true))
    end

    it "loses no acknowledged push across kill -9 of the primary" do
      expect_safe(run_failover(:kill, wait: true))
    end
  end

  context "without wait_replicas" do
    it "counts the acknowledged pushes SENTINEL FAILOVER loses" do
      o = run_failover(:failover, wait: false)
      expect(o.acked).to eq(jobs)
      expect(o.first_job_s).to be < 30
    end

    it "counts the acknowledged pushes kill -9 of the primary loses" do
      o = run_failover(:kill, wait: false)
      expect(o.acked).to eq(jobs)
      expect(o.first_job_s).to be < 30
    end
  end
end
