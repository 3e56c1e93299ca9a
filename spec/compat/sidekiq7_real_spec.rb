# frozen_string_literal: true

require "open3"

# Against the real Sidekiq 7.3.10, loaded from its source (issue #25, acceptance 2). Opt-in: runs only
# when SIDEKIQ7_SRC names a directory holding sidekiq/lib, redis-client/lib and connection_pool/lib
# (Sidekiq v7.3.10, redis-client v0.26.0, connection_pool v2.5.5; README "Moving from Sidekiq 7 and 8" says how to
# make the copy). Every Sidekiq 7 part runs in a subprocess with those three lib dirs first on its
# load path: its server (`sidekiq/bin/sidekiq -r spec/apps/sidekiq7_peer.rb`), and its client, API
# and Web UI (spec/apps/sidekiq7_eval.rb). Ours is exe/queue with the same app file, no sidekiq gem.
SIDEKIQ7_SRC = ENV["SIDEKIQ7_SRC"].to_s

RSpec.describe "the real Sidekiq 7.3.10 beside queue, on one Redis", :sidekiq7 do
  before(:all) do
    skip "set SIDEKIQ7_SRC to a directory with sidekiq/lib, redis-client/lib and connection_pool/lib" if SIDEKIQ7_SRC.empty?
  end

  let(:redis) { TestRedis.client }
  let(:root) { File.expand_path("../..", __dir__) }
  let(:libs) { %w[sidekiq redis-client connection_pool].flat_map { |name| ["-I", File.join(SIDEKIQ7_SRC, name, "lib")] } }
  let(:env) { {"REDIS_URL" => TestRedis.url, "RUBYOPT" => nil, "BUNDLE_GEMFILE" => nil} }
  let(:processes) { [] }

  after do
    processes.each do |pid, _log|
      Process.kill("KILL", pid)
      Process.wait(pid)
    rescue Errno::ESRCH, Errno::ECHILD
      nil
    end
  end

  # Evaluates `code` in a process running Sidekiq 7.3.10's client, API and Web; its JSON value.
  def sidekiq7(code)
    out, err, status = Open3.capture3(env, RbConfig.ruby, *libs, File.join(root, "spec/apps/sidekiq7_eval.rb"), code, chdir: root)
    raise "Sidekiq 7 eval failed (#{status}):\n#{err}\n#{out}" unless status.success?

    JSON.parse(out.lines.last)
  end

  def start_sidekiq7(*args)
    log = File.join(TestRedis.dir, "sidekiq7-#{processes.size}.log")
    pid = Process.spawn(env, RbConfig.ruby, *libs, File.join(SIDEKIQ7_SRC, "sidekiq/bin/sidekiq"),
      "-r", File.join(root, "spec/apps/sidekiq7_peer.rb"), "-c", "2", "-t", "10", *args, chdir: root, out: log, err: [:child, :out])
    processes << [pid, log]
    pid
  end

  def start_queue(*args, env: {})
    ServerProcess.new(app: "sidekiq7_peer.rb", args: ["-c", "2", "-t", "10", *args], env: env).start.tap { |s| processes << [s.pid, s.log] }
  end

  def stop(pid)
    Process.kill("TERM", pid)
    _, status = Process.wait2(pid)
    expect(status.exitstatus).to eq(0), -> { File.read(processes.assoc(pid)[1]) }
  end

  def records(list) = redis.lrange(list, 0, -1).map { |j| JSON.parse(j) }

  # Our client, in this process (the app's classes on JobQueue::Worker).
  def push_ours(klass, *args) = JobQueue::Client.push("class" => klass, "args" => args, "queue" => "default")

  it "runs each other's jobs, with the same arguments" do
    args = ["text ✓", 2**40, 1.5, nil, true, {"h" => [1, "2"]}]
    sk_jid = sidekiq7("Sk7Echo.perform_async(*JSON.parse(#{JSON.generate(args).inspect}))")
    ours = start_queue("-q", "default")
    wait_until("our server to run Sidekiq 7's job") { records("s7:ran").size == 1 }
    stop(ours.pid)
    expect(records("s7:ran").first).to include("jid" => sk_jid, "args" => args, "runner" => start_with("queue"))

    our_jid = push_ours("Sk7Echo", *args)
    sk = start_sidekiq7("-q", "default")
    wait_until("Sidekiq 7.3.10 to run our job") { records("s7:ran").size == 2 }
    stop(sk)
    expect(records("s7:ran").last).to include("jid" => our_jid, "args" => args, "runner" => "sidekiq 7.3.10")
  end

  it "shows our process and its running job on Sidekiq 7's Busy page and API" do
    ours = start_queue("-q", "default", "-g", "s7busy")
    jid = push_ours("Sk7Slow", "busy")
    wait_until("the job to start") { records("s7:started").size == 1 }
    wait_until("our beat to list the job") { redis.hlen("#{redis.smembers("processes").first}:work").positive? }

    seen = sidekiq7(<<~RUBY)
      processes = Sidekiq::ProcessSet.new.map { |p| %w[identity tag concurrency busy version weights queues].to_h { |k| [k, p[k]] } }
      work = Sidekiq::WorkSet.new.map { |_process, _tid, work| {"jid" => work.job.jid, "class" => work.job.klass, "queue" => work.queue} }
      status, body = sidekiq_web("/busy")
      {"processes" => processes, "work" => work, "status" => status, "jid_shown" => body.include?(#{jid.inspect}),
       "tag_shown" => body.include?("s7busy"), "class_shown" => body.include?("Sk7Slow")}
    RUBY
    redis.set("s7:release", "1")
    wait_until("the job to finish") { records("s7:ran").size == 1 }
    stop(ours.pid)

    puts "Sidekiq 7.3.10 sees: #{JSON.generate(seen)}"
    expect(seen["processes"].size).to eq(1)
    expect(seen["processes"].first).to include("tag" => "s7busy", "concurrency" => 2, "busy" => 1, "queues" => ["default"],
      "weights" => [{"default" => 0}])
    expect(seen["processes"].first["version"]).to start_with("queue ")
    expect(seen["work"]).to eq([{"jid" => jid, "class" => "Sk7Slow", "queue" => "default"}])
    expect(seen.values_at("status", "jid_shown", "tag_shown", "class_shown")).to eq([200, true, true, true])
  end

  it "shows a process of ours with two capsules as one process on Sidekiq 7's Busy page" do
    ours = start_queue("-q", "default", env: {"PEER_CAPSULE" => "1"})
    jid = push_ours("Sk7Slow", "capsule")
    JobQueue::Client.push("class" => "Sk7Echo", "args" => ["in single"], "queue" => "single")
    wait_until("the single capsule's job to run") { records("s7:ran").size == 1 }
    wait_until("the slow job to start") { records("s7:started").size == 1 }
    wait_until("our beat to list the job") { redis.hlen("#{redis.smembers("processes").first}:work").positive? }
    seen = sidekiq7(<<~RUBY)
      processes = Sidekiq::ProcessSet.new.map { |p| %w[concurrency busy weights queues capsules].to_h { |k| [k, p[k]] } }
      status, body = sidekiq_web("/busy")
      {"processes" => processes, "status" => status, "jid_shown" => body.include?(#{jid.inspect})}
    RUBY
    redis.set("s7:release", "1")
    wait_until("the slow job to finish") { records("s7:ran").size == 2 }
    stop(ours.pid)

    puts "Sidekiq 7.3.10 sees a process with capsules: #{JSON.generate(seen)}"
    expect(seen["processes"]).to eq([{"concurrency" => 3, "busy" => 1, "weights" => [{"default" => 0}, {"single" => 0}],
      "queues" => %w[default single], "capsules" => {"default" => {"concurrency" => 2, "mode" => "strict", "weights" => {"default" => 0}},
                                                     "single" => {"concurrency" => 1, "mode" => "strict", "weights" => {"single" => 0}}}}])
    expect(seen.values_at("status", "jid_shown")).to eq([200, true])
    expect(records("s7:ran").first).to include("args" => ["in single"], "runner" => start_with("queue"))
  end

  it "shows the jobs our server ran on Sidekiq 7's Metrics page and in Metrics::Query" do
    3.times { |i| push_ours("Sk7Echo", i) }
    ours = start_queue("-q", "default")
    wait_until("the three jobs to run") { records("s7:ran").size == 3 }
    stop(ours.pid) # flushes the counts

    seen = sidekiq7(<<~RUBY)
      result = Sidekiq::Metrics::Query.new.top_jobs(minutes: 5)
      job = result.job_results["Sk7Echo"]
      status, body = sidekiq_web("/metrics")
      detail_status, detail = sidekiq_web("/metrics/Sk7Echo")
      {"p" => job.totals["p"], "f" => job.totals["f"], "ms" => job.totals["ms"], "status" => status,
       "listed" => body.include?("Sk7Echo"), "detail_status" => detail_status, "detail_listed" => detail.include?("Sk7Echo")}
    RUBY
    puts "Sidekiq 7.3.10's Metrics::Query: #{JSON.generate(seen)}"
    expect(seen.values_at("p", "f")).to eq([3, 0])
    expect(seen["ms"]).to be >= 0
    expect(seen.values_at("status", "listed", "detail_status", "detail_listed")).to eq([200, true, 200, true])
  end

  # The iterable job runs on `first` until it has done a few items, is interrupted by a TERM, and
  # finishes on `second` from its cursor: every item runs exactly once, the later ones on `second`.
  def interrupted_and_resumed(first, second, name)
    jid = first == :sidekiq7 ? sidekiq7("Sk7Iterable.perform_async(#{name.inspect}, 40, 0.05)") : push_ours("Sk7Iterable", name, 40, 0.05)
    start = ->(kind) { kind == :sidekiq7 ? start_sidekiq7("-q", "default") : start_queue("-q", "default").pid }
    pid = start.call(first)
    wait_until("a few items to run on #{first}") { redis.llen("s7:items:#{name}") >= 5 }
    stop(pid)
    expect(redis.hget("it-#{jid}", "c")).not_to be_nil
    pid = start.call(second)
    wait_until("the job to finish on #{second}") { redis.llen("s7:done:#{name}") == 1 }
    stop(pid)

    items = records("s7:items:#{name}")
    by_runner = items.group_by { |i| i["runner"].split.first }.transform_values { |list| list.map { |i| i["item"] } }
    puts "#{first} → #{second}: items #{by_runner.transform_values { |l| "#{l.first}..#{l.last} (#{l.size})" }}; " \
      "built from cursors #{records("s7:built:#{name}").map { |b| b["cursor"] }.inspect}"
    expect(items.map { |i| i["item"] }.sort).to eq((0...40).to_a)
    expect(records("s7:built:#{name}").map { |b| b["cursor"] }.first).to be_nil
    expect(records("s7:built:#{name}").last["cursor"]).to eq(by_runner.fetch(second == :sidekiq7 ? "sidekiq" : "queue").first) # the item it was about to run
    expect(records("s7:done:#{name}").first["runner"]).to start_with(second == :sidekiq7 ? "sidekiq" : "queue")
    expect(redis.exists?("it-#{jid}")).to be(false)
  end

  it "resumes on Sidekiq 7.3.10 an iterable job interrupted on our server" do
    interrupted_and_resumed(:queue, :sidekiq7, "ours-first")
  end

  it "resumes on our server an iterable job interrupted on Sidekiq 7.3.10" do
    interrupted_and_resumed(:sidekiq7, :queue, "sidekiq-first")
  end
end
