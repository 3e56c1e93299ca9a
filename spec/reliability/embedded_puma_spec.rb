# frozen_string_literal: true

require "net/http"
require_relative "support"

# Embedded mode in a real Puma (Debian's puma, cluster mode, one worker): spec/apps/embedded_puma's
# puma.rb starts `JobQueue.configure_embed` in on_worker_boot and stops it in on_worker_shutdown, as
# README "Embedded mode (Puma)" shows. Jobs pushed from a request run in the Puma worker; TERM to
# Puma lets running jobs finish, or puts them back when the shutdown timeout runs out.
RSpec.describe "embedded mode in Puma" do
  include_context "with server processes"

  def start_puma(timeout: 25)
    port = free_port
    puma = ServerProcess.new(kind: :puma, app: "embedded_puma", args: ["-b", "tcp://127.0.0.1:#{port}"],
      env: {"QUEUE_TIMEOUT" => timeout.to_s}).start
    servers << puma
    wait_until("puma to listen on #{port}", timeout: 60) { listening?(port) }
    [puma, port]
  end

  # The Puma worker's queue process: [identity, its `info`].
  def embedded_process
    identity = wait_until("the embedded server to register in `processes`", timeout: 60) { redis.smembers("processes").first }
    [identity, JSON.parse(redis.hget(identity, "info"))]
  end

  # Puma's master ends by re-raising the TERM once its workers are gone (raise_exception_on_sigterm,
  # on by default): dying of TERM after the shutdown is its graceful exit.
  def graceful_exit?(status)
    status.success? || status.termsig == Signal.list["TERM"]
  end

  # Enqueues a blocking job from inside a Puma request; returns the worker's pid, which answered.
  def push_through_puma(port, label)
    response = Net::HTTP.get_response(URI("http://127.0.0.1:#{port}/push?label=#{URI.encode_www_form_component(label)}"))
    expect(response.code).to eq("200")
    Integer(response.body)
  end

  it "runs jobs pushed from a request in the Puma worker, marks the process embedded, and finishes them on TERM" do
    puma, port = start_puma
    identity, info = embedded_process
    worker_pid = push_through_puma(port, "job 1")

    expect(worker_pid).not_to eq(puma.pid) # a forked worker, not the master
    expect(identity.split(":")[-2]).to eq(worker_pid.to_s)
    expect(info).to include("embedded" => true, "concurrency" => 2, "queues" => %w[critical default], "pid" => worker_pid)
    expect(info["capsules"]).to eq("default" => {"concurrency" => 2, "mode" => "strict", "weights" => {"critical" => 0, "default" => 0}})
    wait_until("the job to start") { redis.llen("started") == 1 }
    expect(list_of("started").first).to include("pid" => worker_pid, "label" => "job 1")

    puma.signal("TERM")
    wait_until("the embedded server to go quiet") { puma.output.include?("quiet: no new jobs will be taken") }
    expect(list_of("finished")).to be_empty # still running: the stop waits for it
    redis.set("release", "1")
    status = puma.wait

    expect(graceful_exit?(status)).to be(true), status.inspect
    expect(list_of("finished").map { |j| j["pid"] }).to eq([worker_pid])
    expect(puma.output).to include("stopped; 0 unfinished job(s) back in their queues")
    expect(redis.llen("queue:default")).to eq(0)
    expect(working_lists).to be_empty
    expect(redis.smembers("processes")).to be_empty
  end

  it "puts a job still running at the end of the shutdown timeout back on its queue" do
    puma, port = start_puma(timeout: 1)
    embedded_process
    push_through_puma(port, "held")
    wait_until("the job to start") { redis.llen("started") == 1 }
    jid = list_of("started").first["jid"]

    status = puma.stop("TERM")

    expect(graceful_exit?(status)).to be(true), status.inspect
    expect(list_of("finished")).to be_empty
    expect(list_of("queue:default").map { |j| j["jid"] }).to eq([jid])
    expect(puma.output).to include("stopped; 1 unfinished job(s) back in their queues")
    expect(working_lists).to be_empty
    expect(redis.smembers("processes")).to be_empty
  end
end
