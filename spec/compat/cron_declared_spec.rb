# frozen_string_literal: true

require "open3"
require_relative "compat_helper"

# Cron schedules beyond sidekiq-cron's own API: declared on workers (`cron`), GitLab's CronjobQueue
# workers, the start's removal of what the app no longer declares, catching up a tick missed while
# no server ran, bad input, and `queue cron` from a shell.
RSpec.describe "cron schedules declared by the app", :compat do
  def runs_of(tag) = ran.select { |r| r["args"] == [tag] }

  def schedule_file(yaml)
    path = File.join(TestRedis.dir, "schedule-#{Process.clock_gettime(Process::CLOCK_MONOTONIC, :nanosecond)}.yml")
    File.write(path, yaml)
    path
  end

  def start(app, env = {})
    @servers << ServerProcess.new(app: app, args: ["-c", "2"], env: env).start
    @servers.last
  end

  it "stores the workers' and the file's schedules at start, removes the others, and runs them" do
    JobQueue::Cron.load_from_hash("stale" => {"class" => "CompatEcho", "cron" => "0 4 * * *"})
    file = schedule_file(<<~YAML)
      from_file:
        class: CompatEcho
        cron: "* * * * * *"
        args: ["from_file"]
    YAML
    start("cron_worker_app.rb", "CRON_SCHEDULE_FILE" => file)
    wait_until("a run of each schedule") do
      runs_of("declared").any? && runs_of("from_file").any? && ran.any? { |r| r["class"] == "PruneCronWorker" }
    end
    expect(JobQueue::Cron::Job.all.map(&:name)).to eq(%w[cron_declared_worker from_file prune_cron_worker])
    expect(redis.exists?("cron_job:stale")).to be(false)

    # GitLab's cron worker: its cronjob:* queue, no retry, and the context its cron push gets.
    prune = ran.find { |r| r["class"] == "PruneCronWorker" }["job"]
    expect(prune).to include("queue" => "cronjob:prune_cron", "retry" => false,
      "meta.caller_id" => "Cronjob", "meta.feature_category" => "database")
    expect(JobQueue::Cron::Job.find("prune_cron_worker").queue).to eq("cronjob:prune_cron")
  end

  it "refuses to start when the file and a worker declare the same name, and stores nothing" do
    JobQueue::Cron.load_from_hash("kept" => {"class" => "CompatEcho", "cron" => "0 4 * * *"})
    file = schedule_file(<<~YAML)
      cron_declared_worker:
        class: CompatEcho
        cron: "0 4 * * *"
    YAML
    server = start("cron_worker_app.rb", "CRON_SCHEDULE_FILE" => file)
    expect(server.wait(timeout: 60).success?).to be(false)
    expect(server.output).to include("\"cron_declared_worker\" is declared twice")
    expect(JobQueue::Cron::Job.all.map(&:name)).to eq(%w[kept])
  end

  it "gives every bad input its error, naming the schedule, and stores nothing" do
    bad = {
      "six plus zone, seven fields" => ["* * * * * * *", /has 7 fields/],
      "bad seconds" => ["61 * * * * *", /"bad seconds".*not a cron string/],
      "bad zone" => ["0 3 * * * Europe/Nowhere", /"bad zone".*unknown time zone "Europe\/Nowhere"/],
      "empty" => ["", /"empty": no cron string/]
    }
    bad.each do |name, (cron, message)|
      expect { JobQueue::Cron.load_from_hash(name => {"class" => "CompatEcho", "cron" => cron}) }
        .to raise_error(JobQueue::Cron::InvalidSchedule, message)
    end
    expect { JobQueue::Cron.load_from_hash("plain" => {"class" => "String", "cron" => "0 3 * * *"}) }
      .to raise_error(JobQueue::Cron::InvalidSchedule, /"plain": String is not a worker/)
    expect { JobQueue::Cron.load_from_array([{"name" => "a", "class" => "CompatEcho", "cron" => "0 3 * * *"}, "b"]) }
      .to raise_error(JobQueue::Cron::InvalidSchedule, /#2 must be a Hash/)
    expect { JobQueue::Cron.load_from_array([{"class" => "CompatEcho", "cron" => "0 3 * * *"}]) }
      .to raise_error(JobQueue::Cron::InvalidSchedule, /needs a name/)
    expect { JobQueue::Cron.load_file(schedule_file("a: [unclosed\n")) }
      .to raise_error(JobQueue::Cron::InvalidSchedule, /not YAML/)
    expect { JobQueue::Cron.load_file(schedule_file("- 1\n")) }
      .to raise_error(JobQueue::Cron::InvalidSchedule, /#1 must be a Hash/)
    expect { JobQueue::Cron.declare(CompatEcho, nil) }
      .to raise_error(JobQueue::Cron::InvalidSchedule, /CompatEcho: cron needs a cron string/)
    expect(JobQueue::Cron::Job.all).to be_empty
  end

  it "skips a tick missed while no server ran, and catches it up for a schedule that asks" do
    # Hourly at a minute five minutes ago: its latest tick is older than the 60 s a tick may be late.
    minute = (Time.now.utc.min - 5) % 60
    JobQueue::Cron.load_from_hash(
      "skips" => {"class" => "CompatEcho", "cron" => "#{minute} * * * * UTC", "args" => ["skips"]},
      "catches_up" => {"class" => "CompatEcho", "cron" => "#{minute} * * * * UTC", "args" => ["catches_up"], "catch_up" => true},
      "witness" => {"class" => "CompatEcho", "cron" => "* * * * * *", "args" => ["witness"]}
    )
    expect(JobQueue::Cron::Job.find("catches_up")).to be_catch_up
    expect(redis.hget("cron_job:catches_up", "catch_up")).to eq("true")
    # As if saved an hour earlier: the latest tick was never claimed (the save claims the current one).
    latest = redis.zrange("cron_job:skips:enqueued", 0, -1, with_scores: true).last
    %w[skips catches_up].each do |name|
      redis.del("cron_job:#{name}:enqueued")
      redis.zadd("cron_job:#{name}:enqueued", latest[1] - 3600, Time.at(latest[1] - 3600).utc.iso8601)
    end

    server = our_server
    wait_until("three runs of the witness") { runs_of("witness").size >= 3 }
    expect(runs_of("catches_up").size).to eq(1)
    expect(runs_of("skips")).to be_empty
    expect(redis.zrange("cron_job:catches_up:enqueued", 0, -1)).to include(latest[0])
    # sidekiq-cron reads the hash as its own: the extra field is ignored, and its save keeps it.
    seen = sidekiq_cron_valid_after_save("catches_up")
    expect(seen).to eq([true, "true"])

    # A restart (a new scheduler leader building its index) does not run the caught-up tick again.
    expect(server.stop.success?).to be(true)
    witnessed = runs_of("witness").size
    our_server
    wait_until("three more runs of the witness") { runs_of("witness").size >= witnessed + 3 }
    expect(runs_of("catches_up").size).to eq(1)
    expect(runs_of("skips")).to be_empty
  end

  def sidekiq_cron_valid_after_save(name)
    script = <<~RUBY
      require "json"
      require "sidekiq"
      require "sidekiq/cron/job"
      Sidekiq.logger.level = Logger::WARN
      Sidekiq.configure_client { |c| c.redis = {path: #{TestRedis.socket.inspect}} }
      job = Sidekiq::Cron::Job.find(#{name.inspect})
      job.save
      puts JSON.generate([job.valid?, Sidekiq.redis { |r| r.hget("cron_job:#{name}", "catch_up") }])
    RUBY
    out, err, status = Open3.capture3(RbConfig.ruby, "-e", script)
    raise "sidekiq-cron subprocess failed: #{err}" unless status.success?

    JSON.parse(out.lines.last)
  end

  it "lists, disables, enables and runs a schedule from the command line" do
    exe = File.join(ServerProcess::ROOT, "exe", "queue")
    run = ->(*args) { Open3.capture3({"REDIS_URL" => TestRedis.url}, RbConfig.ruby, exe, "cron", *args) }
    expect(run.call("list")).to match(["No cron schedules.\n", "", have_attributes(exitstatus: 0)])
    JobQueue::Cron.load_from_hash("nightly" => {"class" => "CompatEcho", "cron" => "0 3 * * * UTC", "args" => ["cli"], "queue" => "reports"})

    out, = run.call("list")
    header, row = out.lines
    expect(header.split).to eq(%w[NAME STATUS CRON LAST NEXT CLASS])
    next_run = (Time.now.utc.hour < 3 ? Time.now.utc : Time.now.utc + 86_400).strftime("%Y-%m-%d 03:00:00 UTC")
    expect(row).to include("nightly", "enabled", "0 3 * * * UTC", next_run, "CompatEcho")

    expect(run.call("disable", "nightly")).to match(["nightly: disabled\n", "", have_attributes(exitstatus: 0)])
    expect(run.call("disable", "nightly").first).to eq("nightly: already disabled\n")
    expect(JobQueue::Cron::Job.find("nightly")).to be_disabled
    expect(run.call("run", "nightly").first).to eq("nightly: pushed to reports\n")
    job = JSON.parse(redis.lindex("queue:reports", 0))
    expect(job).to include("class" => "CompatEcho", "args" => ["cli"])
    expect(JobQueue::Cron::Job.find("nightly").jid_history.map { |h| h["jid"] }).to eq([job["jid"]])
    expect(run.call("enable", "nightly").first).to eq("nightly: enabled\n")
    expect(JobQueue::Cron::Job.find("nightly")).to be_enabled

    out, err, status = run.call("disable", "nightly", "nope")
    expect([out, status.exitstatus]).to eq(["", 1])
    expect(err).to include('no cron schedule named "nope"')
    expect(JobQueue::Cron::Job.find("nightly")).to be_enabled # nothing changed: every name is found first
    expect(run.call("enable")[1]).to include("queue cron enable needs a schedule NAME")
    expect(run.call("frobnicate")[1]).to include('unknown queue cron action "frobnicate"')
    expect(run.call("-h").first).to include("Usage: queue cron list")
  end
end
