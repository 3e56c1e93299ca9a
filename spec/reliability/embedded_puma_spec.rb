# frozen_string_literal: true

require "net/http"
require_relative "support"

# Embedded mode in a real Puma (Debian's puma 5.6, cluster mode), configured by README "Embedded mode
# (Puma)"'s config/puma.rb as written (two workers, each starting `JobQueue.configure_embed` in
# on_worker_boot and stopping it in on_worker_shutdown), serving spec/apps/embedded_puma. Jobs pushed
# from a request run in a Puma worker; TERM to Puma lets running jobs finish, or puts them back when
# the shutdown timeout runs out.
RSpec.describe "embedded mode in Puma" do
  include_context "with server processes"

  let(:puma_config) do
    path = File.join(TestRedis.dir, "puma-#{Process.clock_gettime(Process::CLOCK_MONOTONIC, :nanosecond)}.rb")
    File.write(path, Readme.blocks("## Embedded mode (Puma)", count: 1).first.code)
    path
  end

  def start_puma(timeout: 25)
    port = free_port
    puma = ServerProcess.new(kind: :puma, app: "embedded_puma", args: ["-C", puma_config, "-b", "tcp://127.0.0.1:#{port}"],
      env: {"QUEUE_TIMEOUT" => timeout.to_s}).start
    servers << puma
    wait_until("puma to listen on #{port}", timeout: 60) { listening?(port) }
    [puma, port]
  end

  # Each Puma worker's queue process: {pid => its `info`}, once both registered.
  def embedded_processes
    identities = wait_until("both workers' embedded servers to register in `processes`", timeout: 60) do
      (ids = redis.smembers("processes")).size == 2 && ids
    end
    identities.to_h { |identity| [Integer(identity.split(":")[-2]), JSON.parse(redis.hget(identity, "info"))] }
  end

  # Puma's master ends by re-raising the TERM once its workers are gone (raise_exception_on_sigterm,
  # on by default): dying of TERM after the shutdown is its graceful exit.
  def graceful_exit?(status)
    status.success? || status.termsig == Signal.list["TERM"]
  end

  # Enqueues a blocking job from inside a Puma request; returns the pid of the worker that answered.
  def push_through_puma(port, label)
    response = Net::HTTP.get_response(URI("http://127.0.0.1:#{port}/push?label=#{URI.encode_www_form_component(label)}"))
    expect(response.code).to eq("200")
    Integer(response.body)
  end

  it "runs jobs pushed from a request in a Puma worker, marks the processes embedded, and finishes them on TERM" do
    puma, port = start_puma
    processes = embedded_processes
    answered_by = push_through_puma(port, "job 1")

    expect(processes.keys).not_to include(puma.pid) # forked workers, not the master
    expect(processes.keys).to include(answered_by)
    expect(processes.values).to all(include("embedded" => true, "concurrency" => 2, "queues" => %w[critical default]))
    expect(processes.values.map { |info| info["capsules"] }.uniq)
      .to eq(["default" => {"concurrency" => 2, "mode" => "strict", "weights" => {"critical" => 0, "default" => 0}}])
    wait_until("the job to start") { redis.llen("started") == 1 }
    ran_in = list_of("started").first["pid"]
    expect(processes.keys).to include(ran_in)

    puma.signal("TERM")
    wait_until("both embedded servers to go quiet") { puma.output.scan("quiet: no new jobs will be taken").size == 2 }
    expect(list_of("finished")).to be_empty # still running: the stop waits for it
    redis.set("release", "1")
    status = puma.wait

    expect(graceful_exit?(status)).to be(true), status.inspect
    expect(list_of("finished").map { |j| j["pid"] }).to eq([ran_in])
    expect(puma.output.scan("stopped; 0 unfinished job(s) back in their queues").size).to eq(2)
    expect(redis.llen("queue:default")).to eq(0)
    expect(working_lists).to be_empty
    expect(redis.smembers("processes")).to be_empty
  end

  it "puts a job still running at the end of the shutdown timeout back on its queue" do
    puma, port = start_puma(timeout: 1)
    embedded_processes
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
