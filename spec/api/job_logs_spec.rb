# frozen_string_literal: true

require_relative "../apps/gitlab_workers"

# Structured JSON job logs, read from a real server's output.
RSpec.describe "JSON job logs" do
  let(:redis) { TestRedis.client }

  # Every line of the server's output, parsed (each must be a JSON object).
  def log_lines(server)
    server.output.lines.map { |line| JSON.parse(line) }
  end

  def job_lines(server)
    log_lines(server).select { |line| line.key?("job_status") }
  end

  def run_and_collect(env:, count:)
    server = start_server(app: "gitlab_workers.rb", args: ["-c", "1", "-q", "logged_arguments", "-q", "failing", "-q", "busy"], env: env)
    wait_until("#{count} job log lines") { server.output.lines.count { |l| l.include?("job_status") } >= count }
    expect(server.stop.exitstatus).to eq(0)
    server
  end

  it "writes start, done and fail lines with GitLab's fields, every line JSON" do
    jid = LoggedArgumentsWorker.with_context(user: "alice", project: "group/app") { LoggedArgumentsWorker.perform_async(7, "a", "b", "c") }
    failed = FailingWorker.perform_async("boom")
    busy = BusyWorker.perform_async(0.2)
    server = run_and_collect(env: {"QUEUE_JOB_LOGS" => "json"}, count: 6)

    lines = job_lines(server)
    expect(log_lines(server).size).to be > lines.size # the server's own lines are JSON too
    by_job = lines.group_by { |l| l["jid"] }

    start, done = by_job.fetch(jid)
    expect(start).to include(
      "class" => "LoggedArgumentsWorker", "jid" => jid, "queue" => "logged_arguments", "job_status" => "start",
      "message" => "LoggedArgumentsWorker JID-#{jid}: start", "pid" => server.pid, "severity" => "INFO",
      "meta.user" => "alice", "meta.project" => "group/app", "meta.root_namespace" => "group"
    )
    expect(start).to include("enqueued_at", "created_at", "scheduling_latency_s", "time")
    expect(start["scheduling_latency_s"]).to be_between(0, 60)
    expect(start).not_to include("args", "duration_s", "cpu_s")
    expect(done).to include("job_status" => "done", "meta.user" => "alice")
    expect(done).to include("duration_s", "cpu_s", "completed_at")
    expect(done["message"]).to eq("LoggedArgumentsWorker JID-#{jid}: done: #{done["duration_s"]} sec")

    _, fail_line = by_job.fetch(failed)
    expect(fail_line).to include(
      "class" => "FailingWorker", "job_status" => "fail", "severity" => "WARN",
      "error_class" => "ArgumentError", "error_message" => "boom"
    )
    expect(fail_line["message"]).to start_with("FailingWorker JID-#{failed}: fail: ")

    _, busy_done = by_job.fetch(busy)
    expect(busy_done["duration_s"]).to be >= 0.2
    expect(busy_done["cpu_s"]).to be_between(0.1, busy_done["duration_s"] + 0.01)
    expect(done["cpu_s"]).to be < 0.1
  end

  it "shows numeric arguments and those listed in loggable_arguments, filtering the rest, when argument logging is on" do
    jid = LoggedArgumentsWorker.perform_async(7, "a", {"secret" => "b"}, "c")
    failed = FailingWorker.perform_async("password=hunter2")
    server = run_and_collect(env: {"QUEUE_JOB_LOGS" => "json", "QUEUE_LOG_ARGUMENTS" => "true"}, count: 4)

    lines = job_lines(server)
    expect(lines.select { |l| l["jid"] == jid }.map { |l| l["args"] }).to eq([[7, "a", "[FILTERED]", "c"]] * 2)
    expect(lines.select { |l| l["jid"] == failed }.map { |l| l["args"] }).to eq([["[FILTERED]"]] * 2)
  end

  it "cuts logged arguments past 10 KB" do
    jid = LoggedArgumentsWorker.perform_async(1, "a" * 6000, "b", "c" * 6000)
    server = run_and_collect(env: {"QUEUE_JOB_LOGS" => "json", "QUEUE_LOG_ARGUMENTS" => "true"}, count: 2)

    expect(job_lines(server).map { |l| [l["jid"], l["args"]] }).to eq([[jid, [1, "a" * 6000, "[FILTERED]", "..."]]] * 2)
  end

  it "turns argument logging on with SIDEKIQ_LOG_ARGUMENTS=1" do
    jid = LoggedArgumentsWorker.perform_async(1.5, "a", "b", "c")
    server = run_and_collect(env: {"QUEUE_JOB_LOGS" => "json", "SIDEKIQ_LOG_ARGUMENTS" => "1"}, count: 2)

    expect(job_lines(server).map { |l| [l["jid"], l["args"]] }).to eq([[jid, [1.5, "a", "[FILTERED]", "c"]]] * 2)
  end

  it "writes no JSON job lines unless asked (the default is Sidekiq's text lines)" do
    EchoWorker.perform_async(1)
    server = start_server(app: "basic.rb", args: ["-c", "1"])
    wait_until("the job to run") { redis.llen("ran:echo") == 1 }
    expect(server.stop.exitstatus).to eq(0)

    expect(server.output).not_to include("job_status")
    expect(server.output).to match(/pid=\d+ tid=\w+ INFO: queue #{Regexp.escape(JobQueue::VERSION)} started/)
  end

  it "costs a job no allocation when the engine writes the lines (or logs are off) and the job has no context" do
    require "queue/processor"
    job = JSON.parse(JSON.generate("class" => "EchoWorker", "args" => [1], "jid" => "a" * 24, "queue" => "default", "enqueued_at" => 1.0))
    engine_lines = JobQueue::Configuration.new.tap { |c| c.engine_job_lines = true }
    off = JobQueue::Configuration.new.tap { |c| c.job_logs = nil }
    [engine_lines, off].each do |config|
      run = proc { JobQueue::JobRun.around(config, EchoWorker, job, "default") { nil } }
      3.times(&run)
      before = GC.stat(:total_allocated_objects)
      1000.times(&run)

      expect(GC.stat(:total_allocated_objects) - before).to be < 10
    end
  end

  describe "settings" do
    it "takes :text (the default), :json (or \"json\") and nil/false, and rejects anything else" do
      config = JobQueue::Configuration.new
      expect(config.job_logs).to eq(:text)
      expect(config.job_log).to be_a(JobQueue::Logging::TextJobLog) # an app's own logger's way
      config.engine_job_lines = true
      expect(config.job_log).to be_nil # the engine writes them
      config.job_logs = "json"
      expect(config.job_logs).to eq(:json)
      expect(config.job_log).to be_a(JobQueue::JobLog)
      config.job_logs = false
      expect(config.job_log).to be_nil
      expect { config.job_logs = :xml }.to raise_error(ArgumentError, /job_logs must be :text, :json/)
      expect { config.log_arguments = "yes" }.to raise_error(ArgumentError, /log_arguments must be true, false or nil/)
    end

    it "reads SIDEKIQ_LOG_ARGUMENTS only when log_arguments is not set" do
      config = JobQueue::Configuration.new
      original = ENV["SIDEKIQ_LOG_ARGUMENTS"]
      ENV["SIDEKIQ_LOG_ARGUMENTS"] = "true"
      expect(config.log_arguments?).to be(true)
      config.log_arguments = false
      expect(config.log_arguments?).to be(false)
      ENV["SIDEKIQ_LOG_ARGUMENTS"] = "0"
      config.log_arguments = nil
      expect(config.log_arguments?).to be(false)
    ensure
      ENV["SIDEKIQ_LOG_ARGUMENTS"] = original
    end
  end
end
