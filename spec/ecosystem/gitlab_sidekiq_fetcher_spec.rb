# frozen_string_literal: true

require "sidekiq"
require "socket"

# A GitLab app moving off Sidekiq 6.4.1 with gitlab-sidekiq-fetcher 0.8 (the Debian gems): the real
# Sidekiq with the fetcher runs in a subprocess (spec/apps/gitlab_fetcher_sidekiq.rb) and is killed or
# stopped with a job running; then our server (spec/apps/gitlab_fetcher_queue.rb) runs what it left.
RSpec.describe "gitlab-sidekiq-fetcher 0.8 before our server" do
  let(:redis) { TestRedis.client }

  before do
    Sidekiq.configure_client { |c| c.redis = {path: TestRedis.socket} }
    Sidekiq.logger.level = Logger::WARN
    @servers = []
  end

  after do |example|
    @servers.each do |server|
      warn("\n--- #{server.log}\n#{server.output}") if example.exception
      server.ensure_stopped
    end
  end

  def start(**options)
    @servers << ServerProcess.new(**options).start
    @servers.last
  end

  def sidekiq_with_fetcher(env = {})
    start(kind: :sidekiq, app: "gitlab_fetcher_sidekiq.rb", args: %w[-c 1 -t 1 -q glfetch], env: env)
  end

  def our_server = start(app: "gitlab_fetcher_queue.rb", args: %w[-c 2 -q glfetch])

  def push(label) = Sidekiq::Client.push("class" => "GlfetchJob", "queue" => "glfetch", "args" => [label])

  def started = redis.lrange("glfetch:started", 0, -1).map { |r| JSON.parse(r) }

  def ran = redis.lrange("glfetch:ran", 0, -1).map { |r| JSON.parse(r) }

  def working_lists = redis.scan_each(match: "working:queue:*").to_a

  def now = Process.clock_gettime(Process::CLOCK_REALTIME)

  it "runs the job a kill -9 stranded in the fetcher's working list, once, when its heartbeat expires" do
    jid = push("stranded")
    sidekiq = sidekiq_with_fetcher
    wait_until("Sidekiq to start the job") { started.any? { |s| s["jid"] == jid } }
    # As 0.8 writes them: working:queue:<queue>:<hostname>:<pid>:<12 hex>, and a heartbeat per process.
    lists = working_lists
    expect(lists).to match([/\Aworking:queue:glfetch:#{Regexp.escape(Socket.gethostname)}:#{sidekiq.pid}:\h{12}\z/])
    expect(redis.lrange(lists.first, 0, -1).map { |j| JSON.parse(j)["jid"] }).to eq([jid])
    heartbeat = "reliable-fetcher-heartbeat-#{lists.first.delete_prefix("working:queue:glfetch:").tr(":", "-")}"
    expect(redis.ttl(heartbeat)).to be_between(1, 60)
    expect(sidekiq.output).to include("GitLab reliable fetch activated!")

    sidekiq.kill!
    killed_at = now
    # The heartbeat lives 60 s after the fetcher's last beat. Its expiry is brought forward to 3 s
    # from the kill, as if the rest of that minute had passed: what is tested is what our server does
    # once it expires, and a minute's wait would only lengthen the suite.
    expect(redis.pexpire(heartbeat, 3000)).to be(true)
    expires_at = killed_at + redis.pttl(heartbeat) / 1000.0
    # The fetcher's cleanup lock, taken for an hour at its first fetch: we do not wait for it.
    expect(redis.ttl("reliable-fetcher-cleanup-lock")).to be > 60
    server = our_server
    record = wait_until("our server to run the stranded job", timeout: 90) { ran.first }
    expect(record).to include("jid" => jid, "label" => "stranded", "pid" => server.pid)
    after_expiry = record["at"] - expires_at
    warn(format("\ngitlab-sidekiq-fetcher recovery: kill -9 -> run on ours %.1f s; heartbeat expiry -> run %.2f s",
      record["at"] - killed_at, after_expiry))
    # Not before its owner's heartbeat expired, and within a turn (3 s) of it, plus start-up slack.
    expect(after_expiry).to be_between(-0.5, 6)

    expect(server.stop.exitstatus).to eq(0)
    expect(ran.size).to eq(1)
    expect(started.size).to eq(1)
    expect(redis.llen("queue:glfetch")).to eq(0)
    expect(working_lists).to be_empty
    expect(server.output).to match(/gitlab-sidekiq-fetcher process stopped beating.*jobs=1/)
  end

  it "stops our server from starting while the app's Sidekiq.configure_server still sets the fetcher up" do
    server = start(app: "gitlab_fetcher_sidekiq.rb", args: %w[-c 1 -q glfetch])
    expect(server.wait(timeout: 30).exitstatus).to eq(1)
    expect(server.output.lines.last).to match(
      /\Aqueue: Sidekiq.configure_server sets Sidekiq.options\[:fetch\] = #<Sidekiq::ReliableFetch.*Remove it from the block and use: nothing: .* puts back what gitlab-sidekiq-fetcher's processes left/
    )
  end

  [["reliable", {}], ["semi-reliable", {"GLFETCH_SEMI" => "1"}]].each do |strategy, env|
    it "loses no job when Sidekiq with the fetcher (#{strategy}) is stopped with TERM and our server takes over" do
      jids = %w[running waiting].map { |label| push(label) }
      sidekiq = sidekiq_with_fetcher(env)
      wait_until("Sidekiq to start the first job") { started.size == 1 }
      expect(started.first["jid"]).to eq(jids.first)

      expect(sidekiq.stop("TERM", timeout: 30).exitstatus).to eq(0)
      # The fetcher's own shutdown put the running job back, counting the interruption.
      queued = redis.lrange("queue:glfetch", 0, -1).map { |j| JSON.parse(j) }
      expect(queued.map { |j| j["jid"] }).to match_array(jids)
      expect(queued.find { |j| j["jid"] == jids.first }["interrupted_count"]).to eq(1)
      expect(working_lists).to be_empty

      server = our_server
      wait_until("both jobs to run on our server") { ran.size >= 2 }
      expect(server.stop.exitstatus).to eq(0)
      expect(ran.map { |r| r["jid"] }).to match_array(jids)
      expect(ran.map { |r| r["pid"] }.uniq).to eq([server.pid])
      expect(redis.llen("queue:glfetch")).to eq(0)
      expect(redis.zcard("interrupted")).to eq(0)
    end
  end
end
