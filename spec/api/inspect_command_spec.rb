# frozen_string_literal: true

require "open3"
require "queue/api"

# `queue stats`, `queue retry|dead list|retry|delete` and `queue morgue …`, run as a user runs them
# (exe/queue in its own process) against data in the suite's Redis.
RSpec.describe "queue stats | retry | dead | morgue" do
  exe = File.join(ServerProcess::ROOT, "exe", "queue")

  def run_exe(exe, *args)
    Open3.capture3({"REDIS_URL" => TestRedis.url}, RbConfig.ruby, exe, *args)
  end

  def redis = TestRedis.client

  def failed(jid, klass, at, set: "retry")
    job = {"class" => klass, "args" => [jid], "jid" => jid, "queue" => "mail", "retry" => true, "retry_count" => 2,
           "error_class" => "Net::ReadTimeout", "error_message" => "timed out", "failed_at" => at, "enqueued_at" => at}
    redis.zadd(set, at, JSON.generate(job))
  end

  it "prints the totals, the daily history and each queue as tables" do
    redis.lpush("queue:mail", JSON.generate("class" => "W", "jid" => "a" * 24, "enqueued_at" => Time.now.to_f - 30))
    redis.sadd("queues", %w[mail default])
    redis.set("stat:processed", 1234)
    redis.set("stat:failed:#{Time.now.utc.strftime("%Y-%m-%d")}", 3)
    failed("b" * 24, "Mailer", Time.now.to_f)

    out, err, status = run_exe(exe, "stats")
    expect([status.exitstatus, err]).to eq([0, ""])
    expect(out).to match(/^Processed\s+1234$/).and match(/^Retries\s+1$/).and match(/^Enqueued\s+1$/)
    expect(out).to match(/^#{Time.now.utc.strftime("%Y-%m-%d")}\s+0\s+3$/)
    expect(out).to match(/^default\s+0\s+0\.00$/).and match(/^mail\s+1\s+(29|3\d)\.\d\d$/)
  end

  it "lists, filters, retries and deletes retry and dead entries" do
    now = Time.now.to_f
    failed("1" * 24, "Mailer", now - 10)
    failed("2" * 24, "Billing", now - 5)
    failed("3" * 24, "Mailer", now, set: "dead")

    out, err, status = run_exe(exe, "retry", "list")
    expect([status.exitstatus, err]).to eq([0, ""])
    lines = out.lines
    expect(lines.first).to match(/^At\s+JID\s+Class\s+Queue\s+Retries\s+Error$/)
    expect(lines[1]).to include("2" * 24, "Billing", "mail", "Net::ReadTimeout: timed out") # latest first
    expect(lines[2]).to include("1" * 24, "Mailer")
    expect(lines.last).to eq("2 shown of 2\n")

    out, _err, _status = run_exe(exe, "retry", "list", "--filter", "Mailer", "--limit", "1")
    expect(out.lines[1]).to include("1" * 24)
    expect(out.lines.size).to eq(3)

    out, _err, status = run_exe(exe, "retry", "retry", "1" * 24, "f" * 24)
    expect([status.exitstatus, out]).to eq([0, "no job #{"f" * 24} in the retry set\nretry: 1 job(s)\n"])
    expect(JSON.parse(redis.lindex("queue:mail", 0))).to include("jid" => "1" * 24, "retry_count" => 1)

    out, _err, status = run_exe(exe, "dead", "delete", "--all")
    expect([status.exitstatus, out]).to eq([0, "delete: 1 job(s)\n"])
    expect(redis.zcard("dead")).to eq(0)

    out, _err, status = run_exe(exe, "retry", "delete", "2" * 24)
    expect([status.exitstatus, out]).to eq([0, "delete: 1 job(s)\n"])
    expect(redis.zcard("retry")).to eq(0)
  end

  it "explains itself with --help and fails clearly on a bad action" do
    %w[stats retry dead].each do |command|
      out, _err, status = run_exe(exe, command, "--help")
      expect(status.exitstatus).to eq(0)
      expect(out).to start_with("Usage: queue #{command}")
    end
    out, _err, status = run_exe(exe, "morgue", "--help")
    expect([status.exitstatus, out]).to match([0, /\AUsage: queue morgue ACTION WORKER/])

    _out, err, status = run_exe(exe, "retry", "explode")
    expect(status.exitstatus).not_to eq(0)
    expect(err).to include("Usage: queue retry ACTION")
    _out, err, status = run_exe(exe, "retry", "delete")
    expect(err).to include("queue retry delete needs JIDs or --all")
  end

  it "passes morgue actions to queue ordered" do
    app = File.join(ServerProcess::APPS, "ordered.rb")
    out, err, status = run_exe(exe, "morgue", "list", "OrderedSyncWorker", "-r", app)
    expect([status.exitstatus, err, out]).to eq([0, "", ""])
    _out, err, status = run_exe(exe, "morgue", "retry", "OrderedSyncWorker", "-r", app)
    expect(err).to include("needs a WORKER and at least one ID")
    expect(status.exitstatus).not_to eq(0)
  end
end
