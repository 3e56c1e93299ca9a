# frozen_string_literal: true

require_relative "support"
require_relative "../apps/basic"

# TSTP quiets a server: it finishes what it runs but takes nothing new, and says so in its process
# hash (`quiet` = "true", read by Sidekiq's dashboard); TERM then stops it.
RSpec.describe "quiet (TSTP)" do
  include_context "with server processes"

  # Waits for the server's next heartbeat (a new `beat` in its process hash; one every 5 s).
  def next_heartbeat(identity)
    before = redis.hget(identity, "beat")
    wait_until("a heartbeat of #{identity}", timeout: 15) { redis.hget(identity, "beat") != before }
  end

  it "takes no new job once quiet, then exits 0 on TERM" do
    server = start_server("basic.rb", "-c", "2")
    EchoWorker.perform_async("before")
    wait_until("the first job to run") { redis.llen("ran:echo") == 1 }
    identity = identity_of(server)
    expect(redis.hget(identity, "quiet")).to eq("false")

    server.signal("TSTP")
    # Pushed the moment the server has gone quiet, while its idle waiters may still be blocked on
    # the queue: a job they take now must go back, not sit unrun in the quiet process.
    wait_until("the server to go quiet") { server.output.include?("quiet: no new jobs") }
    jid = EchoWorker.perform_async("after")
    wait_until("the process hash to say quiet", timeout: 15) { redis.hget(identity, "quiet") == "true" }
    # One more heartbeat (5 s after the one that said quiet): the server has had every chance to
    # take the job.
    next_heartbeat(identity)

    expect(redis.hget(identity, "quiet")).to eq("true")
    expect(list_of("queue:default").map { |j| j["jid"] }).to eq([jid])
    expect(held_jobs).to eq(0)
    expect(redis.llen("ran:echo")).to eq(1)

    expect(server.stop("TERM").exitstatus).to eq(0)
    expect(list_of("queue:default").map { |j| j["jid"] }).to eq([jid])
    expect(redis.llen("ran:echo")).to eq(1)
    expect(redis.smembers("processes")).to be_empty
    expect(working_lists).to be_empty
  end
end
