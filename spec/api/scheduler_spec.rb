# frozen_string_literal: true

require_relative "../apps/api_retry"

RSpec.describe "scheduled jobs in a server process" do
  let(:redis) { TestRedis.client }

  it "runs a perform_in job once it is due, moved from schedule by the scheduler" do
    start_server(app: "api_retry.rb", args: ["-c", "1"])
    jid = ApiScheduledWorker.perform_in(1, "soon")
    expect(redis.zcard("schedule")).to eq(1)

    run = wait_until("the scheduled job to run") { recorded("api:runs").find { |r| r["jid"] == jid } }
    expect(run["args"]).to eq(["soon"])
    expect(redis.zcard("schedule")).to eq(0)
  end

  it "moves what is due and leaves a job due later in the schedule" do
    later = ApiScheduledWorker.perform_in(3600, "later")
    due = {"class" => "ApiScheduledWorker", "args" => ["due"], "queue" => "default", "jid" => "d" * 24,
           "retry" => true, "created_at" => Time.now.to_f - 60}
    redis.zadd("schedule", Time.now.to_f - 30, JSON.generate(due))
    start_server(app: "api_retry.rb", args: ["-c", "1"])

    run = wait_until("the due job to run") { recorded("api:runs").find { |r| r["jid"] == due["jid"] } }
    expect(run["args"]).to eq(["due"])
    expect(sorted_set_jobs("schedule").map { |job, _| job["jid"] }).to eq([later])
  end
end
