# frozen_string_literal: true

require_relative "../apps/basic"

# Issue #10 ("What a user gets"): `queue -v` adds the engine's debug lines (fetch batches, scheduler
# moves, recovery) to the Ruby logger's; without -v (and no QUEUE_LOG) the engine logs warnings only.
RSpec.describe "queue -v" do
  let(:redis) { TestRedis.client }

  # Runs a server, schedules a job half a second ahead (the scheduler moves it, the idle queue's
  # waiter takes it), waits for it to run, stops the server (which recovers its working lists) and
  # returns its output.
  def run_scheduled_job(args)
    server = start_server(app: "basic.rb", args: args, env: {"QUEUE_LOG" => nil})
    registered_process_info
    EchoWorker.perform_in(0.5, "scheduled")
    wait_until("the scheduled job to run") { redis.lindex("ran:echo", 0) }
    expect(server.stop.exitstatus).to eq(0)
    server.output
  end

  it "shows the engine's debug lines for a scheduler move, the fetch and recovery" do
    output = run_scheduled_job(["-v"])
    expect(output).to match(/DEBUG.*scheduler moved due jobs to their queues moved=1/)
    expect(output).to match(/DEBUG.*(idle wait took a job|fetched a batch)/)
    expect(output).to match(/DEBUG.*recovered working lists process=/)
  end

  it "shows none of them without -v" do
    output = run_scheduled_job([])
    expect(output).not_to include("DEBUG", "scheduler moved due jobs", "idle wait took", "fetched a batch", "recovered working lists")
  end
end
