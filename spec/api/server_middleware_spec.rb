# frozen_string_literal: true

require_relative "../apps/api_middleware"

RSpec.describe "server middleware" do
  let(:redis) { TestRedis.client }

  def events
    recorded("api:events")
  end

  it "runs around perform in chain order, with the worker, the job and its queue" do
    jid = ApiMiddlewareWorker.set(queue: "edge").perform_async("hello")
    server = start_server(app: "api_middleware.rb", args: ["-c", "1", "-q", "edge"])
    wait_until("the job's middleware to finish") { events.size == 5 }

    expect(events.map { |e| [e["event"], e["label"]] }).to eq(
      [["before", "outer"], ["before", "inner"], ["perform", nil], ["after", "inner"], ["after", "outer"]]
    )
    expect(events.first).to eq(
      "event" => "before", "label" => "outer", "worker" => "ApiMiddlewareWorker", "worker_jid" => jid,
      "jid" => jid, "queue" => "edge", "tenant" => "acme"
    )
    expect(events[2]).to include("jid" => jid, "arg" => "HELLO")
    expect(server.stop.exitstatus).to eq(0)
  end

  it "skips perform when a middleware does not yield, and the job counts as done" do
    ApiMiddlewareWorker.perform_async("skip")
    ApiMiddlewareWorker.perform_async("next")
    start_server(app: "api_middleware.rb", args: ["-c", "1"])
    wait_until("both jobs to pass the middleware") { events.count { |e| e["event"] == "after" && e["label"] == "outer" } == 2 }

    expect(events.select { |e| e["event"] == "perform" }.map { |e| e["arg"] }).to eq(["NEXT"])
    expect(redis.llen("queue:default")).to eq(0)
    expect(redis.zcard("retry") + redis.zcard("dead")).to eq(0)
    wait_until("both jobs to be counted as processed") { redis.get("stat:processed").to_i == 2 }
    expect(redis.get("stat:failed").to_i).to eq(0)
  end

  it "fails the job like perform would when a middleware raises" do
    jid = ApiMiddlewareWorker.perform_async("raise")
    start_server(app: "api_middleware.rb", args: ["-c", "1"])
    job, = wait_until("the job to reach the retry set") { sorted_set_jobs("retry").first }

    expect(job).to include("jid" => jid, "error_class" => "ArgumentError", "error_message" => "refused by middleware", "retry_count" => 0)
    expect(events.map { |e| [e["event"], e["label"]] }).to eq([["before", "outer"]])
  end
end
