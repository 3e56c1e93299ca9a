# frozen_string_literal: true

require "json"
require "open3"
require "tempfile"
require_relative "compat_helper"

# Cron schedules shared with the real sidekiq-cron 1.8 (Debian's ruby-sidekiq-cron, on Debian's
# Sidekiq 6.4.1), loaded in a subprocess of its own with no poller running: whatever is enqueued,
# our server enqueued it.
RSpec.describe "cron schedules in sidekiq-cron's format", :compat do
  # Runs `code` with sidekiq-cron loaded against the test Redis; returns what it printed as JSON.
  def sidekiq_cron(code)
    script = <<~RUBY
      require "json"
      require "sidekiq"
      require "sidekiq/cron/job"
      Sidekiq.logger.level = Logger::WARN
      Sidekiq.configure_client { |c| c.redis = {path: #{TestRedis.socket.inspect}} }
      result = begin
        #{code}
      end
      puts JSON.generate(result)
    RUBY
    out, err, status = Open3.capture3(RbConfig.ruby, "-e", script)
    raise "sidekiq-cron subprocess failed: #{err}" unless status.success?

    JSON.parse(out.lines.last)
  end

  def runs_of(tag) = ran.select { |r| r["args"] == [tag] }

  it "runs a schedule sidekiq-cron created, and sidekiq-cron sees its last enqueue time" do
    created = sidekiq_cron(<<~RUBY)
      Sidekiq::Cron::Job.create(name: "theirs", cron: "* * * * * *", class: "CompatEcho", args: ["theirs"])
      job = Sidekiq::Cron::Job.find("theirs")
      {"valid" => job.valid?, "status" => job.status}
    RUBY
    expect(created).to eq("valid" => true, "status" => "enabled")

    our_server
    wait_until("two runs of sidekiq-cron's schedule", timeout: 30) { runs_of("theirs").size >= 2 }
    record = runs_of("theirs").first
    expect(record["class"]).to eq("CompatEcho")
    expect(record["job"]).to include("queue" => "default", "retry" => true, "class" => "CompatEcho")

    ran_before = runs_of("theirs").map { |r| r["jid"] } # later runs may land after sidekiq-cron reads
    seen = sidekiq_cron(<<~RUBY)
      job = Sidekiq::Cron::Job.find("theirs")
      {"last" => job.last_enqueue_time&.to_f, "history" => job.send(:jid_history_from_redis).map { |h| h["jid"] }}
    RUBY
    expect(seen["last"]).to be_within(30).of(Time.now.to_f)
    expect(seen["history"]).to include(*ran_before)
  end

  it "lists a schedule we store in Sidekiq::Cron::Job.all, and sidekiq-cron's disable! stops it" do
    JobQueue::Cron.load_from_hash(
      "ours" => {"class" => "CompatEcho", "cron" => "* * * * * *", "args" => ["ours"], "description" => "every second"},
      "witness" => {"class" => "CompatEcho", "cron" => "* * * * * *", "args" => ["witness"]}
    )
    our_server
    wait_until("a run of our schedule") { runs_of("ours").any? }

    listed = sidekiq_cron(<<~RUBY)
      job = Sidekiq::Cron::Job.all.find { |j| j.name == "ours" }
      out = {"status" => job.status, "cron" => job.cron, "klass" => job.klass, "args" => job.args,
             "description" => job.description, "last" => job.last_enqueue_time&.to_f, "valid" => job.valid?}
      job.disable!
      out
    RUBY
    expect(listed).to include("status" => "enabled", "cron" => "* * * * * *", "klass" => "CompatEcho",
      "args" => ["ours"], "description" => "every second", "valid" => true)
    expect(listed["last"]).to be_within(30).of(Time.now.to_f)
    expect(JobQueue::Cron::Job.find("ours")).to be_disabled

    # Once the witness (enabled, every second) has run three more times, "ours" has had its chance.
    ours = JobQueue::Cron::Job.find("ours").jid_history.size
    witness = runs_of("witness").size
    wait_until("three more runs of the witness") { runs_of("witness").size >= witness + 3 }
    expect(JobQueue::Cron::Job.find("ours").jid_history.size).to eq(ours)

    JobQueue::Cron::Job.find("ours").enable!
    wait_until("our schedule to run again once enabled") { JobQueue::Cron::Job.find("ours").jid_history.size > ours }
  end

  it "enqueues each tick once with three servers running" do
    JobQueue::Cron.load_from_hash("three" => {"class" => "CompatEcho", "cron" => "* * * * * *", "args" => ["three"]})
    servers = Array.new(3) { our_server }
    wait_until("ten runs", timeout: 40) { runs_of("three").size >= 10 }
    servers.each { |server| expect(server.stop.success?).to be(true) }

    # Every tick claimed in sidekiq-cron's `:enqueued` set, but the one the save recorded, was pushed
    # once: as many jobs (run, or put back on the queue by the stop) as claimed ticks, one a second.
    ticks = redis.zrange("cron_job:three:enqueued", 0, -1, with_scores: true)
    waiting = redis.lrange("queue:default", 0, -1).map { |raw| JSON.parse(raw) }.select { |j| j["args"] == ["three"] }
    jobs = runs_of("three").map { |r| r["job"] } + waiting
    expect(jobs.size).to eq(ticks.size - 1)
    expect(jobs.map { |j| j["jid"] }.uniq.size).to eq(jobs.size)
    seconds = jobs.map { |j| j["created_at"].floor }
    expect(seconds.uniq.size).to eq(seconds.size)
  end

  describe "loading" do
    def schedule_file(yaml)
      path = File.join(TestRedis.dir, "schedule-#{Process.clock_gettime(Process::CLOCK_MONOTONIC, :nanosecond)}.yml")
      File.write(path, yaml)
      path
    end

    def server_with_schedule(yaml)
      server = ServerProcess.new(app: "cron_schedule_app.rb", args: ["-c", "1"], env: {"CRON_SCHEDULE_FILE" => schedule_file(yaml)}).start
      @servers << server
      server
    end

    it "loads the schedule file when the server starts, and runs it" do
      server_with_schedule(<<~YAML)
        from_file:
          class: CompatEcho
          cron: "* * * * * *"
          args: ["from_file"]
      YAML
      wait_until("a run of the file's schedule") { runs_of("from_file").any? }
      expect(JobQueue::Cron::Job.find("from_file").cron).to eq("* * * * * *")
    end

    it "refuses to start on a bad schedule file, naming the schedule" do
      server = server_with_schedule(<<~YAML)
        broken_one:
          class: CompatEcho
          cron: "0 3 * * * Mars/Olympus"
      YAML
      status = server.wait(timeout: 60)
      expect(status.success?).to be(false)
      expect(server.output).to include("broken_one").and include("Mars/Olympus")
      expect(redis.exists?("cron_job:broken_one")).to be(false)
    end

    it "stores nothing and names the schedule when one is bad" do
      bad = {
        "good" => {"class" => "CompatEcho", "cron" => "0 3 * * *"},
        "bad_cron" => {"class" => "CompatEcho", "cron" => "61 3 * * *"}
      }
      expect { JobQueue::Cron.load_from_hash(bad) }
        .to raise_error(JobQueue::Cron::InvalidSchedule, /"bad_cron"/)
      expect(JobQueue::Cron::Job.all).to be_empty

      expect { JobQueue::Cron.load_from_hash("tz" => {"class" => "CompatEcho", "cron" => "0 3 * * * Nowhere/Land"}) }
        .to raise_error(JobQueue::Cron::InvalidSchedule, /"tz".*time zone "Nowhere\/Land"/)
      expect { JobQueue::Cron.load_from_hash("cls" => {"class" => "NoSuchWorker", "cron" => "0 3 * * *"}) }
        .to raise_error(JobQueue::Cron::InvalidSchedule, /"cls".*unknown class NoSuchWorker/)
      expect { JobQueue::Cron.load_from_hash("shape" => "0 3 * * *") }
        .to raise_error(JobQueue::Cron::InvalidSchedule, /"shape"/)
      expect(JobQueue::Cron::Job.all).to be_empty
    end

    it "reads config/schedule.yml as sidekiq-cron does, and load_from_hash! removes what is not declared" do
      JobQueue::Cron.load_from_hash("old" => {"class" => "CompatEcho", "cron" => "0 4 * * *"})
      Tempfile.create(["schedule", ".yml"]) do |f|
        f.write(<<~YAML)
          nightly:
            class: CompatEcho
            cron: "0 3 * * * Europe/Berlin"
            args: [1, "two"]
            queue: reports
        YAML
        f.flush
        JobQueue::Cron.load_file(f.path)
      end
      expect(JobQueue::Cron::Job.all.map(&:name)).to eq(%w[nightly old])
      nightly = JobQueue::Cron::Job.find("nightly")
      expect([nightly.cron, nightly.args, nightly.queue, nightly.status]).to eq(["0 3 * * * Europe/Berlin", [1, "two"], "reports", "enabled"])

      JobQueue::Cron.load_from_hash!("nightly" => {"class" => "CompatEcho", "cron" => "0 3 * * *"})
      expect(JobQueue::Cron::Job.all.map(&:name)).to eq(%w[nightly])
      expect(redis.exists?("cron_job:old")).to be(false)

      Tempfile.create(["schedule", ".yml"]) do |f|
        f.write("just a string\n")
        f.flush
        expect { JobQueue::Cron.load_file(f.path) }.to raise_error(JobQueue::Cron::InvalidSchedule, /Hash or an Array/)
      end
    end

    it "keeps a disabled schedule disabled when the schedule is loaded again" do
      JobQueue::Cron.load_from_array([{"name" => "keep", "class" => "CompatEcho", "cron" => "0 3 * * *"}])
      JobQueue::Cron::Job.find("keep").disable!
      JobQueue::Cron.load_from_array([{"name" => "keep", "class" => "CompatEcho", "cron" => "0 5 * * *"}])
      keep = JobQueue::Cron::Job.find("keep")
      expect([keep.cron, keep.status]).to eq(["0 5 * * *", "disabled"])
      listed = sidekiq_cron('Sidekiq::Cron::Job.find("keep").then { |j| [j.status, j.cron, j.valid?] }')
      expect(listed).to eq(["disabled", "0 5 * * *", true])
    end
  end
end
