# frozen_string_literal: true

require_relative "support"
require_relative "../apps/reliability_block"

# A process that dies holding jobs (SIGKILL: no cleanup) does not take them to the grave: another
# live process sees it stop beating and puts its working lists back on their queues, where they run.
# The design promises this within 30 s of the death; the bound is the wait's timeout, not a
# measurement.
RSpec.describe "recovery of a dead process's jobs by another process" do
  include_context "with server processes"

  it "runs the jobs a killed process held on a live one within 30 s" do
    doomed = start_server("reliability_block.rb", "-c", "3")
    jids = Array.new(3) { |i| ReliabilityBlockingWorker.perform_async("job #{i}") }
    wait_until("the doomed process to run all 3 jobs") do
      list_of("started").count { |j| j["pid"] == doomed.pid } == 3
    end
    doomed_identity = identity_of(doomed)
    expect(held_jobs(doomed_identity)).to eq(3)

    survivor = start_server("reliability_block.rb", "-c", "3")
    survivor_identity = identity_of(survivor)

    doomed.kill!
    died = monotonic
    redis.set("release", "1") # from now on the jobs finish wherever they run
    finished = wait_until("the survivor to run the dead process's jobs", timeout: 30) do
      done = list_of("finished")
      done if done.size == jids.size
    end
    report(format("recovery: %d jobs of a killed process ran on another one %.1f s after the kill",
      jids.size, monotonic - died))

    expect(finished.map { |j| j["jid"] }).to match_array(jids)
    expect(finished.map { |j| j["pid"] }.uniq).to eq([survivor.pid])
    expect(held_jobs(doomed_identity)).to eq(0)
    expect(redis.exists?("jq:working:#{doomed_identity}")).to be(false)
    expect(redis.zscore("jq:alive", doomed_identity)).to be_nil
    expect(redis.llen("queue:default")).to eq(0)

    expect(survivor.stop.exitstatus).to eq(0)
    expect(working_lists).to be_empty
    expect(redis.smembers("processes")).not_to include(survivor_identity)
  end
end
