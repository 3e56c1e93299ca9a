# frozen_string_literal: true

require_relative "../apps/basic"

# A server's log as a user reads it (a real server process, spec/apps/logs.rb): a job's own lines in
# its context and between its start and done lines, time ordered; a failure's error and backtrace;
# ordered batches' start/done lines in the same family.
RSpec.describe "a server's log lines" do
  let(:redis) { TestRedis.client }
  let(:ordered) { ordered_worker("LogsOrderedWorker") { self.shards_count = 1 } }

  PRETTY = /\A(?<time>\S+) pid=\d+ tid=(?<tid>\w+)(?<ctx>(?: \w+=\S*)*) (?<level>[A-Z]+): (?<message>.*)\z/

  def push(*args)
    JobQueue::Client.push("class" => "LoggingWorker", "args" => args)
  end

  # Runs the server over the jobs pushed until `runs` have run, stops it, returns its output.
  def run_server(runs, env: {})
    server = start_server(app: "logs.rb", args: ["-c", "1"], env: env)
    wait_until("#{runs} runs") { redis.llen("ran:logs") >= runs }
    expect(server.stop.exitstatus).to eq(0)
    server.output
  end

  # [[time, ctx, level, message], ...] of the Pretty lines (a backtrace's lines after the first
  # are its message's).
  def pretty_lines(output)
    output.lines(chomp: true).filter_map { |line| PRETTY.match(line)&.then { |m| [m[:time], m[:ctx].strip, m[:level], m[:message]] } }
  end

  it "puts a job's logger lines, and a logger's taken before the server started, between its start and done, in its context and in time order" do
    jids = %w[a b c].map { |text| push(text) }
    lines = pretty_lines(run_server(3))

    expect(lines.map(&:first)).to eq(lines.map(&:first).sort) # the stream follows time
    jids.zip(%w[a b c]).each do |jid, text|
      ctx = "class=LoggingWorker jid=#{jid}"
      job_lines = lines.select { |l| l[1].start_with?(ctx) }.map { |l| l[1..] }
      expect(job_lines).to eq([
        [ctx, "INFO", "start"], [ctx, "INFO", "#{text} (early)"], [ctx, "INFO", "#{text} (logger)"]
      ] << [job_lines.last[0], "INFO", "done"])
      expect(job_lines.last[0]).to match(/\A#{ctx} elapsed=\d+\.\d+\z/)
      expect(lines.index { |l| l[3] == "#{text} (logger)" }).to eq(lines.index { |l| l[3] == "#{text} (early)" } + 1)
    end
  end

  it "gives a job's lines their context in the JSON formatter's ctx" do
    jid = push("j")
    lines = run_server(1, env: {"QUEUE_JOB_LOGS" => "json"}).lines.map { |line| JSON.parse(line) }

    own = lines.select { |l| l["message"].to_s.start_with?("j (") }
    expect(own.map { |l| [l["message"], l["ctx"]] }).to eq([
      ["j (early)", {"class" => "LoggingWorker", "jid" => jid}], ["j (logger)", {"class" => "LoggingWorker", "jid" => jid}]
    ])
    statuses = lines.select { |l| l["jid"] == jid || l.dig("ctx", "jid") == jid }.map { |l| l["job_status"] || l["message"] }
    expect(statuses).to eq(["start", "j (early)", "j (logger)", "done"])
  end

  it "logs a failure's error and then its backtrace at WARN, in the job's context, as Sidekiq's error handler" do
    jid = push("f", true)
    output = run_server(1)
    ctx = "class=LoggingWorker jid=#{jid}"

    error_at = output.lines.index { |l| l.include?(" #{ctx} WARN: Job raised exception: ArgumentError: f failed") }
    expect(error_at).not_to be_nil
    trace = output.lines[error_at + 1..]
    expect(trace.first).to match(%r{ #{ctx} WARN: \S*spec/apps/logs\.rb:\d+:in `perform'$})
    expect(trace[1]).to match(%r{\A\S*lib/queue/\S+\.rb:\d+:in }) # the backtrace's next lines follow
    expect(output.lines[error_at - 1]).to match(/ #{ctx} elapsed=\d+\.\d+ INFO: fail$/)
  end

  it "gives each ordered batch start and done (or fail) lines with its worker, ids, count and elapsed; a failure names them" do
    ordered.perform_async([{id: "o1", payload: 1}, {id: "o2", payload: 2}, {id: "o3", payload: "doomed"}])
    server = start_server(app: "logs.rb", args: ["-c", "1"])
    wait_until("every id to run") { redis.lrange("ran:logs", 0, -1).flat_map { |ids| ids.split(",") }.sort == %w[o1 o2 o3] }
    expect(server.stop.exitstatus).to eq(0)

    lines = pretty_lines(server.output).map { |l| l[1..] }
    starts = lines.each_index.select { |i| lines[i][0].start_with?("class=LogsOrderedWorker") && lines[i][2] == "start" }
    expect(starts.size).to eq(2) # batches of up to 2 ids
    starts.each do |at|
      ctx = lines[at][0]
      ids = ctx[/ids=(\S+)/, 1].split(",")
      expect(ctx).to eq("class=LogsOrderedWorker ids=#{ids.join(",")} count=#{ids.size}")
      expect(lines[at + 1]).to eq([ctx, "INFO", "ordered #{ids.join(",")}"])
      outcome = ids.include?("o3") ? "fail" : "done"
      expect(lines[at + 2]).to match([/\A#{ctx} elapsed=\d+\.\d+\z/, "INFO", outcome])
      next if outcome == "done"

      expect(lines[at + 3]).to eq([ctx, "WARN", "Ordered job raised exception: ArgumentError: doomed batch"])
      expect(lines[at + 4]).to match([ctx, "WARN", %r{spec/apps/logs\.rb:\d+:in `perform'}])
    end
  end

  it "writes an ordered batch's lines as JSON with job_logs = :json" do
    ordered.perform_async([{id: "j1", payload: 1}])
    server = start_server(app: "logs.rb", args: ["-c", "1"], env: {"QUEUE_JOB_LOGS" => "json"})
    wait_until("the batch to run") { redis.llen("ran:logs") == 1 }
    expect(server.stop.exitstatus).to eq(0)

    lines = server.output.lines.map { |line| JSON.parse(line) }.select { |l| l.dig("ctx", "class") == "LogsOrderedWorker" }
    expect(lines.map { |l| [l["job_status"], l["message"], l["ctx"].slice("ids", "count")] }).to eq([
      ["start", "LogsOrderedWorker ids=j1: start", {"ids" => ["j1"], "count" => 1}],
      [nil, "ordered j1", {"ids" => ["j1"], "count" => 1}],
      ["done", "LogsOrderedWorker ids=j1: done", {"ids" => ["j1"], "count" => 1}]
    ])
    expect(lines.last).to include("class" => "LogsOrderedWorker", "ids" => ["j1"], "count" => 1, "severity" => "INFO")
    expect(lines.last["duration_s"]).to be >= 0
  end
end
