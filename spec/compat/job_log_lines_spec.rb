# frozen_string_literal: true

require_relative "compat_helper"

# Sidekiq 6.4.1 logs `start`, then `done` or `fail` with `elapsed=`, for every job, each line with
# pid, tid, class and jid (tags when present) in its Pretty format. The same jobs run by each server
# must give the same lines, field for field.
RSpec.describe "per-job log lines, as Sidekiq 6.4.1 writes them", :compat do
  LINE = /\A(?<time>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z) pid=(?<pid>\d+) tid=(?<tid>[0-9a-z]+) class=(?<class>\S+) jid=(?<jid>\h{24})(?: tags=(?<tags>\S+))?(?: elapsed=(?<elapsed>\d+\.\d+))? INFO: (?<message>start|done|fail)\z/

  # The job lines of a server's output: [jid => [[message, tags, elapsed?, tid], ...]].
  def job_lines(output, jids)
    lines = output.lines(chomp: true).filter_map { |l| LINE.match(l) }
    lines.each { |m| expect(m[:pid].to_i).to be_positive }
    lines.group_by { |m| m[:jid] }.slice(*jids).transform_values do |ms|
      ms.map { |m| [m[:class], m[:message], m[:tags], !m[:elapsed].nil?, m[:tid]] }
    end
  end

  def run_jobs(server_kind)
    jids = [CompatEcho.perform_async("a"), CompatEcho.set("tags" => %w[x y]).perform_async("b"), CompatDoomed.perform_async]
    server = server_kind == :sidekiq ? sidekiq_server(env: {"COMPAT_LOG_LEVEL" => "info"}) : our_server
    wait_for_runs(2)
    wait_until("the failing job in the dead set") { redis.zcard("dead") == 1 }
    server.stop
    [jids, job_lines(server.output, jids)]
  end

  it "gives start and done (or fail) lines with Sidekiq's fields, in Sidekiq's order" do
    sidekiq_jids, sidekiq = run_jobs(:sidekiq)
    redis.flushdb
    our_jids, ours = run_jobs(:queue)

    shape = ->(lines, jids) { jids.map { |jid| lines.fetch(jid).map { |l| l[0..3] } } }
    expected = [
      [["CompatEcho", "start", nil, false], ["CompatEcho", "done", nil, true]],
      [["CompatEcho", "start", "x,y", false], ["CompatEcho", "done", "x,y", true]],
      [["CompatDoomed", "start", nil, false], ["CompatDoomed", "fail", nil, true]]
    ]
    expect(shape.(sidekiq, sidekiq_jids)).to eq(expected)
    expect(shape.(ours, our_jids)).to eq(expected)
    ours.each_value { |lines| expect(lines.map(&:last).uniq.size).to eq(1) } # one thread per job
  end

  it "stays silent at WARN, as Sidekiq does" do
    jid = CompatEcho.perform_async("quiet")
    server = our_server(env: {"COMPAT_LOG_LEVEL" => "warn"})
    wait_for_runs(1)
    server.stop
    expect(job_lines(server.output, [jid])).to be_empty
  end
end
