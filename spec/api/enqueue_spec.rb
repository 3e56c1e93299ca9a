# frozen_string_literal: true

module ApiSpec
  class EnqueueWorker
    include JobQueue::Worker
    sidekiq_options queue: "mail"
  end
end

RSpec.describe "enqueueing a job" do
  let(:redis) { TestRedis.client }

  describe "perform_async" do
    it "writes a Sidekiq job to queue:<name> and adds the name to queues" do
      before_push = Time.now.to_f
      jid = ApiSpec::EnqueueWorker.perform_async(1, "two", {"three" => [3.0, nil, true]})

      expect(redis.smembers("queues")).to eq(["mail"])
      raw = redis.lrange("queue:mail", 0, -1)
      expect(raw.size).to eq(1)
      job = JSON.parse(raw.first)
      expect(job.keys).to contain_exactly("class", "args", "queue", "jid", "created_at", "enqueued_at", "retry")
      expect(job).to include(
        "class" => "ApiSpec::EnqueueWorker", "args" => [1, "two", {"three" => [3.0, nil, true]}],
        "queue" => "mail", "jid" => jid, "retry" => true
      )
      expect(jid).to match(/\A\h{24}\z/).and eq(jid.downcase)
      expect(job["created_at"]).to be_a(Float).and be >= before_push
      expect(job["enqueued_at"]).to be_a(Float).and be >= job["created_at"]
    end

    it "writes created_at and enqueued_at with a fractional part, as Ruby's Float#to_s does" do
      ApiSpec::EnqueueWorker.perform_async
      raw = redis.lindex("queue:mail", 0)
      expect(raw).to match(/"created_at":\d+\.\d+/).and match(/"enqueued_at":\d+\.\d+/)
    end

    it "gives every job its own jid" do
      jids = Array.new(20) { ApiSpec::EnqueueWorker.perform_async }
      expect(jids.uniq.size).to eq(20)
      expect(queued_jobs("mail").map { |j| j["jid"] }).to eq(jids)
    end
  end

  describe "perform_in and perform_at" do
    it "puts a job due later in schedule, scored by its time, without at or enqueued_at" do
      before_push = Time.now.to_f
      jid = ApiSpec::EnqueueWorker.perform_in(300, "later")

      expect(redis.exists?("queue:mail")).to be(false)
      (job, score), *rest = sorted_set_jobs("schedule")
      expect(rest).to be_empty
      expect(job).to include("jid" => jid, "class" => "ApiSpec::EnqueueWorker", "args" => ["later"], "queue" => "mail")
      expect(job.keys).not_to include("at", "enqueued_at")
      expect(score).to be_between(before_push + 300, Time.now.to_f + 300)
    end

    it "takes an epoch time or a Time in perform_at" do
      at = Time.now.to_f + 3600
      ApiSpec::EnqueueWorker.perform_at(at, "epoch")
      ApiSpec::EnqueueWorker.perform_at(Time.at(at + 1), "time")

      scores = sorted_set_jobs("schedule").to_h { |job, score| [job["args"].first, score] }
      expect(scores["epoch"]).to be_within(0.001).of(at)
      expect(scores["time"]).to be_within(0.001).of(at + 1)
    end

    it "enqueues at once when the time has passed" do
      ApiSpec::EnqueueWorker.perform_at(Time.now - 60, "past")
      ApiSpec::EnqueueWorker.perform_in(-5, "negative")

      expect(redis.zcard("schedule")).to eq(0)
      jobs = queued_jobs("mail")
      expect(jobs.map { |j| j["args"].first }).to eq(%w[past negative])
      expect(jobs).to all(include("enqueued_at"))
      expect(jobs).to all(satisfy { |j| !j.key?("at") })
    end

    it "refuses an interval that is not a number or a Time" do
      expect { ApiSpec::EnqueueWorker.perform_in("soon") }.to raise_error(ArgumentError, /interval/)
      expect(redis.keys("*")).to be_empty
    end
  end

  describe "set" do
    it "overrides the queue for one push only" do
      ApiSpec::EnqueueWorker.set(queue: :urgent).perform_async(1)
      ApiSpec::EnqueueWorker.perform_async(2)

      expect(queued_jobs("urgent").map { |j| [j["queue"], j["args"]] }).to eq([["urgent", [1]]])
      expect(queued_jobs("mail").map { |j| j["args"] }).to eq([[2]])
      expect(redis.smembers("queues")).to contain_exactly("urgent", "mail")
    end

    it "passes other job options through" do
      ApiSpec::EnqueueWorker.set(retry: false, "trace_id" => "t-1").perform_async
      expect(queued_jobs("mail").first).to include("retry" => false, "trace_id" => "t-1")
    end

    it "schedules with wait: seconds" do
      before_push = Time.now.to_f
      ApiSpec::EnqueueWorker.set(wait: 120).perform_async("waited")
      job, score = sorted_set_jobs("schedule").first
      expect(job["args"]).to eq(["waited"])
      expect(job.keys).not_to include("at", "enqueued_at", "wait")
      expect(score).to be_between(before_push + 120, Time.now.to_f + 120)
    end

    it "schedules with wait_until: a Time or epoch seconds" do
      at = Time.now + 600
      ApiSpec::EnqueueWorker.set(wait_until: at).perform_async("time")
      ApiSpec::EnqueueWorker.set(wait_until: at.to_f + 1, queue: "other").perform_async("epoch")

      entries = sorted_set_jobs("schedule")
      expect(entries.map { |job, _| job["args"].first }).to eq(%w[time epoch])
      expect(entries.map(&:last)).to match([be_within(0.001).of(at.to_f), be_within(0.001).of(at.to_f + 1)])
      expect(entries.last.first["queue"]).to eq("other")
      expect(entries.map(&:first)).to all(satisfy { |j| !j.key?("wait_until") })
    end

    it "enqueues at once when wait_until has passed" do
      ApiSpec::EnqueueWorker.set(wait_until: Time.now - 1).perform_async("late")
      expect(redis.zcard("schedule")).to eq(0)
      expect(queued_jobs("mail").first["args"]).to eq(["late"])
    end
  end

  describe "JobQueue::Client.push" do
    it "accepts a class name and uses the default options" do
      jid = JobQueue::Client.push("class" => "Some::RemoteWorker", "args" => [1])
      job = queued_jobs("default").first
      expect(job).to include("class" => "Some::RemoteWorker", "jid" => jid, "retry" => true, "queue" => "default")
    end

    it "keeps a jid and created_at given by the caller" do
      JobQueue::Client.push("class" => ApiSpec::EnqueueWorker, "args" => [], "jid" => "a" * 24, "created_at" => 1.5)
      expect(queued_jobs("mail").first).to include("jid" => "a" * 24, "created_at" => 1.5)
    end

    it "refuses a job without a class, with args that are not an Array, or with an empty queue" do
      expect { JobQueue::Client.push("args" => []) }.to raise_error(ArgumentError, /class/)
      expect { JobQueue::Client.push("class" => "W", "args" => 1) }.to raise_error(ArgumentError, /args/)
      expect { JobQueue::Client.push("class" => "W", "args" => [], "queue" => "") }.to raise_error(ArgumentError, /queue/)
      expect { JobQueue::Client.push("class" => "W", "args" => [], "at" => "soon") }.to raise_error(ArgumentError, /at/)
      expect(redis.keys("*")).to be_empty
    end
  end
end
