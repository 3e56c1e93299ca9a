# frozen_string_literal: true

require_relative "shim_helper"

# `include Sidekiq::IterableJob` under queue/compat/sidekiq (spec/apps/iterable_sidekiq_shim.rb): a job
# pushed as Sidekiq 7.3 pushes it, interrupted by a TERM and resumed by the next server from its cursor.
RSpec.describe "queue/compat/sidekiq: Sidekiq::IterableJob", :shim do
  let(:redis) { TestRedis.client }
  let(:jid) { "5a1b7d2e9a41f8b6c5d4e3f2" }

  def start = ServerProcess.new(app: "iterable_sidekiq_shim.rb", args: ["-q", "shim_it", "-t", "10"]).start

  it "stops at TERM with its cursor saved, and the next server runs the rest: every item once" do
    job = {"retry" => true, "queue" => "shim_it", "class" => "ShimIterableJob", "args" => [30], "jid" => jid,
           "created_at" => Time.now.to_f, "enqueued_at" => Time.now.to_f}
    redis.lpush("queue:shim_it", JSON.generate(job))

    first = start
    wait_until("4 items to run") { redis.get("shim_it:count").to_i >= 4 }
    expect(first.stop("TERM").exitstatus).to eq(0)
    ran = redis.hgetall("shim_it:runs")
    expect(ran.values.uniq).to eq(["1"])
    expect(redis.hget("it-#{jid}", "c")).to eq(ran.size.to_s)
    expect(redis.lrange("queue:shim_it", 0, -1).map { |raw| JSON.parse(raw)["jid"] }).to eq([jid])
    expect(redis.lrange("shim_it:events", 0, -1)).to eq(["on_start", "on_stop interrupted"])

    second = start
    wait_until("the job to complete") { redis.lrange("shim_it:events", 0, -1).last == "on_complete" }
    wait_until("it-#{jid} to be deleted") { !redis.exists?("it-#{jid}") }
    expect(redis.hgetall("shim_it:runs")).to eq((0...30).to_h { |i| [i.to_s, "1"] })
    expect(redis.lrange("shim_it:built", 0, -1)).to eq(["null", ran.size.to_s])
    expect(redis.lrange("shim_it:events", 0, -1)).to eq(["on_start", "on_stop interrupted", "on_resume", "on_stop", "on_complete"])
  ensure
    [first, second].compact.each(&:ensure_stopped)
  end
end
