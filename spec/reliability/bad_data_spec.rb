# frozen_string_literal: true

require_relative "support"
require_relative "../apps/reliability_bad_data"

# Whatever lands in a queue, the server keeps running: data that is not a job goes to the dead set as
# it was found, a job that cannot run goes to the retry set with its error, and healthy jobs behind
# them still run.
RSpec.describe "bad data in a queue" do
  include_context "with server processes"

  def raw_job(klass, args, jid)
    JSON.generate("class" => klass, "args" => args, "jid" => jid, "queue" => "default", "retry" => true,
      "created_at" => Time.now.to_f, "enqueued_at" => Time.now.to_f)
  end

  it "buries what is not a job, retries what cannot run, and keeps serving" do
    server = start_server("reliability_bad_data.rb", "-c", "2")
    identity_of(server)

    invalid_json = "{\"class\":\"EchoWorker\",\"args\":[1,"
    array = "[\"EchoWorker\",[1,2]]"
    no_args = JSON.generate("class" => "EchoWorker", "jid" => "0123456789abcdef01234567")
    not_utf8 = "\xFF\xFE{\"class\"".b
    unknown_class = raw_job("NoSuchWorker", [1], "aaaaaaaaaaaaaaaaaaaaaaaa")
    wrong_arity = raw_job("ReliabilityPairWorker", [1], "bbbbbbbbbbbbbbbbbbbbbbbb")
    [invalid_json, array, no_args, not_utf8, unknown_class, wrong_arity].each do |raw|
      redis.lpush("queue:default", raw)
    end
    redis.sadd?("queues", "default")
    jid = EchoWorker.perform_async("still works")

    ran = wait_until("the healthy job to run") { redis.lrange("ran:echo", 0, -1).first }
    expect(JSON.parse(ran)).to eq("jid" => jid, "args" => ["still works"])
    wait_until("every bad job to be filed") { redis.zcard("dead") == 4 && redis.zcard("retry") == 2 }
    expect(server.running?).to be(true)

    # Not a job: dead, byte for byte as it was in the queue.
    dead = redis.zrange("dead", 0, -1).map(&:b)
    expect(dead).to match_array([invalid_json, array, no_args, not_utf8].map(&:b))

    # A job that cannot run: retried later, with the error that stopped it.
    retries = redis.zrange("retry", 0, -1).map { |raw| JSON.parse(raw) }.to_h { |job| [job["jid"], job] }
    expect(retries.keys).to match_array(%w[aaaaaaaaaaaaaaaaaaaaaaaa bbbbbbbbbbbbbbbbbbbbbbbb])
    expect(retries["aaaaaaaaaaaaaaaaaaaaaaaa"]).to include(
      "class" => "NoSuchWorker", "error_class" => "NameError", "retry_count" => 0, "queue" => "default"
    )
    expect(retries["aaaaaaaaaaaaaaaaaaaaaaaa"]["error_message"]).to include("NoSuchWorker")
    expect(retries["bbbbbbbbbbbbbbbbbbbbbbbb"]).to include(
      "class" => "ReliabilityPairWorker", "args" => [1], "error_class" => "ArgumentError", "retry_count" => 0
    )
    expect(redis.llen("ran:pair")).to eq(0)
    expect(redis.get("stat:failed").to_i).to eq(6)

    # Nothing is left half-handled.
    expect(redis.llen("queue:default")).to eq(0)
    wait_until("every acknowledgement to be written") { held_jobs.zero? }
    expect(server.stop.exitstatus).to eq(0)
  end
end
