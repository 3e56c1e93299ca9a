# frozen_string_literal: true

require_relative "web_helper"
require "net/http"

# `queue web`: the dashboard alone, on Debian's puma, with the app loaded by -r.
RSpec.describe "queue web" do
  let(:exe) { File.expand_path("../../exe/queue", __dir__) }

  def spawn_web(*args)
    log = File.join(TestRedis.dir, "web-#{Process.clock_gettime(Process::CLOCK_MONOTONIC, :nanosecond)}.log")
    pid = Process.spawn({"REDIS_URL" => TestRedis.url}, RbConfig.ruby, exe, "web", *args, out: log, err: [:child, :out], pgroup: true)
    @pids << pid
    [pid, log]
  end

  before { @pids = [] }

  after do
    @pids.each do |pid|
      Process.kill("KILL", pid)
      Process.wait(pid)
    rescue Errno::ESRCH, Errno::ECHILD
      nil
    end
  end

  it "serves the pages and the JSON API on the port given, with the app's ordered workers, until TERM" do
    port = free_port
    pid, log = spawn_web("--port", port.to_s, "-r", File.expand_path("../apps/web_ordered.rb", __dir__))
    wait_until("queue web to listen on #{port}", timeout: 20) { listening?(port) }
    expect(File.read(log)).to include("queue web: puma on http://127.0.0.1:#{port}/")

    stats = Net::HTTP.get_response(URI("http://127.0.0.1:#{port}/api/v1/stats"))
    expect(stats.code).to eq("200")
    expect(JSON.parse(stats.body)).to eq("total" => {"length" => 0, "morgue_length" => 0, "lag" => 0.0},
      "by_worker" => {"WebCliOrderedWorker" => {"length" => 0, "morgue_length" => 0, "lag" => 0.0}})
    ordered = Net::HTTP.get_response(URI("http://127.0.0.1:#{port}/ordered"))
    expect(ordered.code).to eq("200")
    expect(ordered.body).to include("WebCliOrderedWorker")
    expect(ordered["set-cookie"]).to include("queue.web.session=", "HttpOnly", "SameSite=Strict")

    Process.kill("TERM", pid)
    _, status = Process.wait2(pid)
    @pids.delete(pid)
    expect(status.success? || status.termsig == 15).to be(true)
  end

  it "rejects a bad port where it is given" do
    pid, log = spawn_web("--port", "99999")
    _, status = Process.wait2(pid)
    @pids.delete(pid)
    expect(status.exitstatus).to eq(1)
    expect(File.read(log)).to include("queue: invalid argument: --port 99999 (must be 1..65535)")
  end
end
