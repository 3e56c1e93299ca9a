# frozen_string_literal: true

require "zlib"
require "base64"
require_relative "../apps/api_retry"

RSpec.describe "failed jobs in a server process" do
  let(:redis) { TestRedis.client }

  before { start_server(app: "api_retry.rb", args: ["-c", "2", "-q", "default", "-q", "api_slow"]) }

  # The failure of `jid` is fully handled once the error handlers, which run last, have seen it.
  def wait_for_failure(jid, count: 1)
    wait_until("failure #{count} of #{jid} to be handled") { recorded("api:errors").count { |e| e["jid"] == jid } >= count }
  end

  def for_jid(list, jid)
    recorded(list).select { |entry| entry["jid"] == jid }
  end

  it "retries after the seconds sidekiq_retry_in returns, with Sidekiq's bookkeeping" do
    jid = ApiFailingWorker.perform_async(1000)
    wait_for_failure(jid)

    (job, score), *others = sorted_set_jobs("retry")
    expect(others).to be_empty
    expect(job).to include(
      "jid" => jid, "class" => "ApiFailingWorker", "queue" => "default", "retry_count" => 0,
      "error_class" => "ApiRetry::Boom", "error_message" => "always fails"
    )
    expect(job["failed_at"]).to be_a(Float)
    expect(job).not_to have_key("retried_at")
    # 1000 seconds plus Sidekiq's jitter of rand(10) * (retry_count + 1).
    expect(score - job["failed_at"]).to be_between(999.9, 1010)
    backtrace = JSON.parse(Zlib::Inflate.inflate(Base64.decode64(job["error_backtrace"])))
    expect(backtrace.size).to eq(2)
    expect(backtrace.first).to include("api_retry.rb")

    expect(redis.zcard("dead")).to eq(0)
    expect(recorded("api:exhausted") + recorded("api:deaths")).to be_empty
    expect(redis.get("stat:failed").to_i).to eq(1)
  end

  it "sends the job to the dead set at once when sidekiq_retry_in returns :kill" do
    jid = ApiFailingWorker.perform_async("kill")
    wait_for_failure(jid)

    expect(redis.zcard("retry")).to eq(0)
    dead, = sorted_set_jobs("dead").first
    expect(dead).to include("jid" => jid, "retry_count" => 0, "error_class" => "ApiRetry::Boom")
    summary = {"jid" => jid, "class" => "ApiFailingWorker", "retry_count" => 0, "error_class" => "ApiRetry::Boom",
               "error_message" => "always fails", "exception" => "ApiRetry::Boom", "message" => "always fails"}
    expect(recorded("api:exhausted")).to eq([summary])
    expect(recorded("api:deaths")).to eq([summary])
  end

  it "drops the job without a trace when sidekiq_retry_in returns :discard" do
    jid = ApiFailingWorker.perform_async("discard")
    wait_for_failure(jid)

    expect(redis.zcard("retry") + redis.zcard("dead") + redis.llen("queue:default")).to eq(0)
    expect(recorded("api:exhausted") + recorded("api:deaths")).to be_empty
    expect(redis.get("stat:failed").to_i).to eq(1)
  end

  it "calls sidekiq_retries_exhausted with the job and the exception, then the death handlers" do
    jid = ApiNoRetriesWorker.perform_async("x")
    wait_for_failure(jid)

    expect(for_jid("api:exhausted", jid)).to match([include("class" => "ApiNoRetriesWorker", "retry_count" => 0, "exception" => "ApiRetry::Boom", "message" => "always fails")])
    expect(for_jid("api:deaths", jid)).to match([include("exception" => "ApiRetry::Boom", "error_message" => "always fails")])
    expect(sorted_set_jobs("dead").map { |job, _| job["jid"] }).to eq([jid])
    expect(redis.zcard("retry")).to eq(0)
  end

  it "calls only the death handlers for retry: false, and keeps the job nowhere" do
    jid = ApiNoRetryWorker.perform_async("x")
    wait_for_failure(jid)

    expect(for_jid("api:deaths", jid)).to match([include("class" => "ApiNoRetryWorker", "exception" => "ApiRetry::Boom")])
    expect(recorded("api:exhausted")).to be_empty
    expect(redis.zcard("retry") + redis.zcard("dead")).to eq(0)
  end

  it "skips the dead set for dead: false, still calling the exhausted block and death handlers" do
    jid = ApiNoMorgueWorker.perform_async("x")
    wait_for_failure(jid)

    expect(redis.zcard("dead") + redis.zcard("retry")).to eq(0)
    expect(for_jid("api:exhausted", jid).size).to eq(1)
    expect(for_jid("api:deaths", jid).size).to eq(1)
  end

  it "files the retry on retry_queue" do
    jid = ApiRetryQueueWorker.perform_async(1000)
    wait_for_failure(jid)

    job, = sorted_set_jobs("retry").first
    expect(job).to include("jid" => jid, "queue" => "api_slow", "retry_queue" => "api_slow", "retry_count" => 0)
  end

  it "runs a due retry again: the scheduler moves it back to its queue" do
    jid = ApiFlakyWorker.perform_async(1)
    runs = wait_until("the retry to run") { for_jid("api:runs", jid).then { |r| r if r.size == 2 } }

    expect(runs.map { |r| r["run"] }).to eq([1, 2])
    wait_until("the retry to be acknowledged") { redis.get("stat:processed").to_i == 2 }
    expect(redis.get("stat:failed").to_i).to eq(1)
    expect(redis.zcard("retry") + redis.zcard("dead") + redis.llen("queue:default")).to eq(0)
  end

  it "exhausts a job after its last retry, counting the retries" do
    jid = ApiFailingWorker.set(retry: 1).perform_async(1)
    wait_for_failure(jid, count: 2)

    expect(for_jid("api:runs", jid).size).to eq(2)
    dead, = sorted_set_jobs("dead").first
    expect(dead).to include("jid" => jid, "retry_count" => 1, "retry" => 1)
    expect(dead["retried_at"]).to be_a(Float)
    expect(for_jid("api:exhausted", jid)).to match([include("retry_count" => 1)])
    # The error handlers saw the job as each attempt ran, as in Sidekiq (sentry-sidekiq's
    # report_after_job_retries goes by that retry_count): first run, then the retry of retry_count 0.
    expect(for_jid("api:errors", jid).map { |e| [e["retry_count"], e["error_message"]] }).to eq([[nil, nil], [0, "always fails"]])
    # Sidekiq's context keys: the job as it ran and as it was fetched (sentry-sidekiq merges the job's
    # fields into this hash, so a key of its own beside them would appear twice in an event).
    expect(for_jid("api:errors", jid).map { |e| [e["context"], e["jobstr_jid"]] }).to all(eq([%w[context job jobstr], jid]))
  end
end

RSpec.describe "Sidekiq 7.1+ retry habits in a server process" do
  let(:redis) { TestRedis.client }

  before { start_server(app: "api_retry.rb", args: ["-c", "2", "-q", "default"]) }

  def wait_for_failure(jid)
    wait_until("the failure of #{jid} to be handled") { recorded("api:errors").any? { |e| e["jid"] == jid } }
  end

  # A job that first failed `ago` seconds before now, its failed_at in seconds or Sidekiq 8's ms.
  def push_failed(worker, ago, millis: false)
    failed_at = Time.now.to_f - ago
    failed_at = (failed_at * 1000).floor if millis
    JobQueue::Client.push("class" => worker, "args" => [1], "retry_count" => 0, "failed_at" => failed_at)
  end

  it "retries a job within its retry_for window" do
    jid = push_failed(ApiRetryForWorker, 10)
    wait_for_failure(jid)

    expect(sorted_set_jobs("retry").map { |job, _| job.values_at("jid", "retry_count", "retry_for") }).to eq([[jid, 1, 60]])
    expect(redis.zcard("dead")).to eq(0)
  end

  it "exhausts a job once retry_for seconds have passed since failed_at, in either time form" do
    jids = [push_failed(ApiRetryForWorker, 120), push_failed(ApiRetryForWorker, 120, millis: true)]
    jids.each { |jid| wait_for_failure(jid) }

    expect(redis.zcard("retry")).to eq(0)
    expect(sorted_set_jobs("dead").map { |job, _| job["jid"] }).to match_array(jids)
    expect(recorded("api:exhausted").map { |e| e["jid"] }).to match_array(jids)
    expect(recorded("api:deaths").map { |e| e["jid"] }).to match_array(jids)
  end

  it "keeps a job out of the dead set and skips death handlers when sidekiq_retries_exhausted returns :discard" do
    jid = ApiDiscardingWorker.perform_async("x")
    wait_for_failure(jid)

    expect(recorded("api:exhausted").map { |e| e["jid"] }).to eq([jid])
    expect(redis.zcard("dead") + redis.zcard("retry") + redis.llen("queue:default")).to eq(0)
    expect(recorded("api:deaths")).to be_empty
    expect(redis.get("stat:failed").to_i).to eq(1)
  end

  it "exhausts a job on its last attempt without asking sidekiq_retry_in (whose :discard then does not apply)" do
    jid = ApiFailingWorker.set(retry: 0).perform_async("discard")
    wait_for_failure(jid)

    expect(sorted_set_jobs("dead").map { |job, _| job["jid"] }).to eq([jid])
    expect(recorded("api:exhausted").map { |e| e["jid"] }).to eq([jid])
  end
end

RSpec.describe "error handlers of two and three arguments in a server process" do
  before { start_server(app: "api_retry.rb", args: ["-c", "1", "-q", "default"]) }

  it "calls each with the arguments it takes: Sidekiq 7's (error, context, config), Sidekiq 6's (error, context)" do
    jid = ApiFailingWorker.perform_async(1000)
    wait_until("the failure to be handled") { recorded("api:errors").any? { |e| e["jid"] == jid } }

    expect(recorded("api:errors3")).to eq([{"jid" => jid, "config" => "JobQueue::Configuration"}])
    expect(recorded("api:errors_any")).to eq([{"jid" => jid, "arity" => 3}])
    expect(recorded("api:errors").map { |e| e.slice("error", "jid") }).to eq([{"error" => "ApiRetry::Boom", "jid" => jid}])
    # The default handler, a Method of two parameters, is still called with two (it logs the error).
    expect(api_servers.last.output).not_to match(/error handler .* raised/)
  end
end
