# frozen_string_literal: true

require "queue/api"
require "queue/web"
require "queue/metrics"
require "queue/testing/redis_server"
require "open3"
require "tmpdir"
require "queue/rails_integration/config_file"
require_relative "../apps/shards"

# Shards over two real redis-servers: the suite's (shard "main") and one started here ("jobs_b").
RSpec.describe "Redis shards (config.redis_shards)" do
  let(:app) { File.join(ServerProcess::APPS, "shards.rb") }

  before(:all) { @shard_b = JobQueue::Testing::RedisServer.new(prefix: "queue-test-shard-b", tcp: true).start }
  after(:all) { @shard_b&.stop }

  let(:main) { TestRedis.client }
  let(:b) { Redis.new(path: @shard_b.socket) }
  let(:servers) { [] }

  before do
    b.flushall
    JobQueue.configure do |c|
      c.redis_shards = {"jobs_b" => {url: @shard_b.url}}
      c.routing_rules = [["resource_boundary=cpu", "cpu_bound", "jobs_b"], ["*", nil]]
    end
  end

  after { servers.each(&:ensure_stopped) }

  def server(*args, env: {})
    ServerProcess.new(app: "shards.rb", args: args, env: {"SHARD_B_URL" => @shard_b.url}.merge(env)).start.tap { |s| servers << s }
  end

  def runs = main.lrange("shards:ran", 0, -1).map { |r| JSON.parse(r) }

  def queue_exe(*args)
    Open3.capture3({"REDIS_URL" => TestRedis.url, "SHARD_B_URL" => @shard_b.url}, RbConfig.ruby, File.join(ServerProcess::ROOT, "exe", "queue"), *args, chdir: ServerProcess::ROOT)
  end

  it "puts each job on its worker's shard: by store:, by a routing rule's third element, by via" do
    ShardBJob.perform_async(1)                         # the engine's template path
    ShardBJob.set(tags: ["x"]).perform_async(2)        # the Ruby path
    ShardBJob.perform_bulk([[3], [4]])
    ShardBJob.perform_in(60, 5)
    ShardCpuWorker.perform_async(6)
    ShardMainJob.perform_async(7)
    expect(b.llen("queue:on_b")).to eq(4)
    expect(b.zcard("schedule")).to eq(1)
    expect(b.llen("queue:cpu_bound")).to eq(1)
    expect(b.smembers("queues")).to contain_exactly("on_b", "cpu_bound")
    expect(main.llen("queue:moving")).to eq(1)
    expect(main.exists?("queue:on_b") || main.exists?("queue:cpu_bound") || main.zcard("schedule").positive?).to be(false)

    # via wins over store:, nests, and restores the outer shard (also after a raise).
    JobQueue::Client.via("jobs_b") do
      ShardMainJob.perform_async(8)
      JobQueue::Client.via("main") { ShardBJob.perform_async(9) }
      ShardMainJob.perform_in(60, 10)
      expect(JobQueue::Queue.new("moving").size).to eq(1) # the API reads the block's shard
    end
    expect { JobQueue::Client.via("jobs_b") { raise "boom" } }.to raise_error("boom")
    expect(JobQueue::Shards.current).to be_nil
    expect(b.llen("queue:moving")).to eq(1)
    expect(main.llen("queue:on_b")).to eq(1)
    expect(b.zcard("schedule")).to eq(2)

    expect { JobQueue::Client.via("jobs_c") {} }.to raise_error(ArgumentError, /unknown shard "jobs_c"; the configured shards are "main", "jobs_b"/)
    expect { JobQueue.config.redis_shards = {"b" => {bogus: 1}} }.to raise_error(ArgumentError, /redis_shards: shard "b": unknown redis option\(s\) bogus/)
  end

  it "keeps a batch and its jobs on one shard, and says so when a job's store names another" do
    batch = JobQueue::Batch.new
    expect { batch.jobs { ShardBJob.perform_async(1) } }.to raise_error(ArgumentError, /a job stored on shard "jobs_b" cannot join a batch on shard "main".*JobQueue::Client.via\("jobs_b"\)/)
    expect { batch.jobs { ShardBJob.set(tags: ["x"]).perform_async(2) } }.to raise_error(ArgumentError, /cannot join a batch on shard "main"/)
    expect(b.llen("queue:on_b")).to eq(0)

    JobQueue::Client.via("jobs_b") do
      on_b = JobQueue::Batch.new
      on_b.jobs do
        ShardBJob.perform_async(3)                  # the engine's template path
        ShardBJob.set(tags: ["y"]).perform_async(4) # the Ruby path
      end
      expect(JobQueue::Batch::Status.new(on_b.bid).total).to eq(2)
    end
    expect(b.lrange("queue:on_b", 0, -1).map { |j| JSON.parse(j)["bid"] }.uniq.size).to eq(1)
  end

  it "puts an ordered worker's queue on its store's shard" do
    worker = Module.new do
      extend JobQueue::OrderedWorker
      self.queue_name = "shard_ordered"
      self.store = "jobs_b"
    end
    worker.perform_async([{id: 1, payload: "a"}])
    expect(b.keys("*shard_ordered*")).not_to be_empty
    expect(main.keys("*shard_ordered*")).to be_empty
    expect { worker.store = "bad name" }.to raise_error(ArgumentError, /store must be a shard name/)
  ensure
    JobQueue::OrderedWorker.forget(worker) if worker
  end

  it "takes a shard's name in the Sidekiq shim's Sidekiq::Client.via, and refuses a pool" do
    code = <<~RUBY
      Sidekiq.configure_client { |c| c.redis = {url: ENV["REDIS_URL"]} }
      JobQueue.config.redis_shards = {"jobs_b" => {url: ENV["SHARD_B_URL"]}}
      class ViaWorker; include Sidekiq::Worker; sidekiq_options queue: "via_q"; end
      Sidekiq::Client.via("jobs_b") { ViaWorker.perform_async(1) }
      begin
        Sidekiq::Client.via(Object.new) {}
      rescue NotImplementedError => e
        puts e.message
      end
    RUBY
    out, status = Open3.capture2e({"REDIS_URL" => TestRedis.url, "SHARD_B_URL" => @shard_b.url}, RbConfig.ruby,
      "-I", File.join(ServerProcess::ROOT, "lib"), "-r", "queue/compat/sidekiq", "-e", code)
    expect(status).to be_success, out
    expect(out).to include("give a shard's name from config.redis_shards")
    expect(b.llen("queue:via_q")).to eq(1)
    expect(main.llen("queue:via_q")).to eq(0)
  end

  it "reads redis_shards from config/queue.yml, naming the file in an error" do
    Dir.mktmpdir do |dir|
      path = File.join(dir, "queue.yml")
      File.write(path, "redis:\n  url: #{TestRedis.url}\ntest:\n  redis_shards:\n    jobs_b:\n      url: <%= \"#{@shard_b.url}\" %>\n")
      JobQueue.configure { |c| c.redis_shards = {} }
      JobQueue::RailsIntegration::ConfigFile.apply(path, "test")
      expect(JobQueue.config.shards.names).to eq(%w[main jobs_b])
      ShardBJob.perform_async(1)
      expect(b.llen("queue:on_b")).to eq(1)

      File.write(path, "redis_shards:\n  jobs_b:\n    bogus: 1\n")
      expect { JobQueue::RailsIntegration::ConfigFile.apply(path, "test") }
        .to raise_error(ArgumentError, /\A#{Regexp.escape(path)}: redis_shards: shard "jobs_b": unknown redis option/)
    end
  end

  it "takes a shard behind Redis Sentinel: its pushes reach the master the sentinels name" do
    set = SentinelServers.new.start
    JobQueue.configure do |c|
      c.redis_shards = {"jobs_b" => {url: "redis://#{SentinelServers::MASTER}/0", sentinels: set.sentinels}}
    end
    ShardBJob.perform_async(1)
    ShardMainJob.perform_async(2)
    expect(set.client(set.primary_port) { |c| c.llen("queue:on_b") }).to eq(1)
    expect(main.llen("queue:moving")).to eq(1)
    expect(JobQueue::Queue.new("on_b", shard: "jobs_b").size).to eq(1)
  ensure
    set&.stop
  end

  it "lets a rule's shard be main's on an app without redis_shards" do
    JobQueue.configure { |c| c.redis_shards = {} }
    ShardCpuWorker.perform_async(1)
    ShardBJob.perform_async(2)
    expect(main.llen("queue:cpu_bound")).to eq(1)
    expect(main.llen("queue:on_b")).to eq(1)
  end

  it "shows every shard in the API, the CLI, the dashboard and /metrics" do
    2.times { ShardMainJob.perform_async(1) }
    3.times { ShardBJob.perform_async(1) }
    ShardBJob.perform_in(60, 1)

    expect(JobQueue::Queue.all.map { |q| [q.name, q.shard, q.size] }).to contain_exactly(["moving", "main", 2], ["on_b", "jobs_b", 3])
    expect(JobQueue::Stats.new.enqueued).to eq(5)
    expect(JobQueue::Stats.new.queues).to eq("on_b" => 3, "moving" => 2)
    expect(JobQueue::Stats.new(shard: "jobs_b").enqueued).to eq(3)
    expect(JobQueue.stats["enqueued"]).to eq(5)
    expect(JobQueue::Client.via("jobs_b") { JobQueue.stats["enqueued"] }).to eq(3)
    expect(JobQueue::ScheduledSet.new(shard: "jobs_b").size).to eq(1)
    expect(JobQueue::ScheduledSet.new.size).to eq(0)
    expect(JobQueue::Queue.new("on_b", shard: "jobs_b").map(&:klass)).to eq(%w[ShardBJob] * 3)

    out, err, status = queue_exe("stats", "-r", app)
    expect(status).to be_success, err
    expect(out).to match(/Shard/).and match(/on_b\s*\|?\s*jobs_b\s*\|?\s*3/).and match(/moving\s*\|?\s*main\s*\|?\s*2/)
    out, _, status = queue_exe("stats", "-r", app, "--shard", "jobs_b")
    expect(status).to be_success
    expect(out).to match(/on_b/)
    expect(out).not_to match(/moving/)

    web = Rack::MockRequest.new(JobQueue::Web.new(session_secret: "x" * 64))
    page = web.get("/queues")
    expect(page.body).to include('data-shard="jobs_b"').and include("moving")
    expect(page.body).not_to include("on_b")
    page = web.get("/queues?shard=jobs_b")
    expect(page.body).to include("on_b")
    expect(page.body).not_to match(%r{/queues/moving})

    text = JobQueue::Metrics.text(ordered: [])
    expect(text).to include('queue_queue_size{shard="main",queue="moving"} 2').and include('queue_queue_size{shard="jobs_b",queue="on_b"} 3')
    expect(text.scan(/^# TYPE queue_queue_size /).size).to eq(1)
    expect(text).to end_with("# EOF\n")
  end

  it "moves a queue's queued, scheduled and retrying jobs and its dedup keys, and finishes a batch a stopped move left" do
    jids = Array.new(250) { |i| ShardMainJob.perform_async(i) }
    scheduled = ShardMainJob.perform_in(3600, "later")
    main.zadd("retry", Time.now.to_f + 3600, JSON.generate("class" => "ShardMainJob", "queue" => "moving", "jid" => "r1", "args" => []))
    main.zadd("retry", Time.now.to_f + 3600, JSON.generate("class" => "Other", "queue" => "other", "jid" => "r2", "args" => []))
    main.set("duplicate:moving:#{"a" * 64}", "jid1", ex: 600)
    # What a move stopped after writing its batch on jobs_b left on main: the batch held, its token,
    # and jobs_b's marker for that token.
    main.rpush("jq:moving:moving:queue", JSON.generate("class" => "ShardMainJob", "queue" => "moving", "jid" => "held", "args" => []))
    main.set("jq:moving:moving:queue:token", "t1")
    b.set("jq:moved:t1", "1")
    b.lpush("queue:moving", JSON.generate("class" => "ShardMainJob", "queue" => "moving", "jid" => "held", "args" => []))

    out, err, status = queue_exe("migrate", "-r", app, "--queue", "moving", "--from", "main", "--to", "jobs_b")
    expect(status).to be_success, err
    expect(out).to include("moved queue moving from shard main to jobs_b: 250 queued, 1 scheduled, 1 retrying job(s), 1 deduplication key(s)")

    moved = b.lrange("queue:moving", 0, -1).map { |j| JSON.parse(j)["jid"] }
    expect(moved.size).to eq(251)
    expect(moved.tally.values.max).to eq(1)
    expect(moved.reverse.first(251)).to eq(["held", *jids]) # oldest runs first, order kept
    expect(b.zrange("schedule", 0, -1).map { |j| JSON.parse(j)["jid"] }).to eq([scheduled])
    expect(b.zrange("retry", 0, -1).map { |j| JSON.parse(j)["jid"] }).to eq(["r1"])
    expect(main.zrange("retry", 0, -1).map { |j| JSON.parse(j)["jid"] }).to eq(["r2"])
    expect(b.ttl("duplicate:moving:#{"a" * 64}")).to be_between(590, 600)
    expect(main.keys("*moving*")).to be_empty
    expect(main.sismember("queues", "moving")).to be(false)
    expect(b.sismember("queues", "moving")).to be(true)

    expect { JobQueue.move_queue("moving", from: "main", to: "jobs_c") }.to raise_error(ArgumentError, /unknown shard "jobs_c"/)
  end

  it "runs one server per shard (--shard, QUEUE_SHARD_NAME), each only its shard's jobs, both in ProcessSet" do
    on_main = server("--shard", "main", "-q", "moving", "-c", "2")
    on_b = server("-q", "on_b", "-q", "cpu_bound", "-c", "2", env: {"QUEUE_SHARD_NAME" => "jobs_b"})
    main_jids = Array.new(20) { |i| ShardMainJob.perform_async(i) }
    b_jids = Array.new(20) { |i| ShardBJob.perform_async(i) } + [ShardCpuWorker.perform_async(0)]

    wait_until("41 runs") { runs.size >= 41 }
    by_jid = runs.to_h { |r| [r["jid"], r["pid"]] }
    expect(runs.size).to eq(41)
    expect(main_jids.map { |j| by_jid[j] }.uniq).to eq([on_main.pid])
    expect(b_jids.map { |j| by_jid[j] }.uniq).to eq([on_b.pid])

    _, err, status = queue_exe("-r", app, "--shard", "main,jobs_c")
    expect(status.exitstatus).to eq(1)
    expect(err).to include('unknown shard "jobs_c"; the configured shards are "main", "jobs_b"')

    processes = wait_until("both processes") { (list = JobQueue::ProcessSet.new.to_a).size == 2 && list }
    expect(processes.map { |p| [p["pid"], p["shard"]] }).to contain_exactly([on_main.pid, "main"], [on_b.pid, "jobs_b"])
    expect(JobQueue::ProcessSet.new.total_concurrency).to eq(4)
    [on_main, on_b].each { |s| expect(s.stop.exitstatus).to eq(0) }
  end

  it "moves a queue between shards while clients push and one server serving both runs it: none lost, none doubled" do
    both = server("--shard", "main,jobs_b", "-q", "moving", "-c", "3")
    processes = wait_until("the server on both shards") { (list = JobQueue::ProcessSet.new.to_a).size == 2 && list }
    expect(processes.map { |p| p["shard"] }).to contain_exactly("main", "jobs_b")
    expect(processes.map { |p| p["pid"] }.uniq).to eq([both.pid])

    pushed = Queue.new
    stop = false
    pusher = Thread.new do
      n = 0
      until stop || n >= 8000
        pushed << ShardMainJob.perform_async(n += 1) # to main, the queue's old shard
        pushed << ShardMainJob.perform_in(1, n) if (n % 50).zero?
        sleep 0.0003 # ~2,000 pushes a second: faster than the server runs them, so a backlog forms
      end
    end
    begin
      wait_until("a backlog on main") { main.llen("queue:moving") > 300 }
      out, err, status = queue_exe("migrate", "-r", app, "--queue", "moving", "--from", "main", "--to", "jobs_b")
      pushes_during = pusher.alive?
    ensure
      stop = true
      pusher.join
    end
    expect(status).to be_success, err
    expect(pushes_during).to be(true)
    moved = out[/: (\d+) queued/, 1].to_i
    jids = Array.new(pushed.size) { pushed.pop }

    # What reached main after the move's last batch runs there (the server serves both shards).
    wait_until("every pushed job to run", timeout: 60) { runs.size >= jids.size }
    ran = runs.map { |r| r["jid"] }
    puts "\n  shards: #{jids.size} pushed, #{moved} moved mid-traffic, #{ran.size} runs, " \
         "#{(jids - ran).size} lost, #{ran.size - ran.uniq.size} doubled"
    expect(moved).to be > 0
    expect(ran.tally.values.max).to eq(1)
    expect(ran).to match_array(jids)
    expect(both.stop.exitstatus).to eq(0)
  end

  it "keeps each shard a Sidekiq keyspace: a Sidekiq 6.4.1 server on jobs_b runs the jobs we put there" do
    jids = [ShardBJob.perform_async(1), ShardBJob.perform_async("two"), ShardBJob.perform_in(1, 3)]
    sidekiq = ServerProcess.new(kind: :sidekiq, app: "shards_sidekiq.rb", args: ["-q", "on_b", "-c", "2"],
      env: {"SHARD_B_URL" => @shard_b.url}).start
    servers << sidekiq
    wait_until("Sidekiq to run 3 jobs") { runs.size >= 3 }
    expect(runs.map { |r| [r["jid"], r["runner"]] }).to contain_exactly(*jids.map { |j| [j, "sidekiq 6.4.1"] })
    expect(sidekiq.stop.exitstatus).to eq(0)
  end
end
