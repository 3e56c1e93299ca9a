# frozen_string_literal: true

module ApiSpec
  class BulkWorker
    include JobQueue::Worker
    sidekiq_options queue: "bulk", "source" => "import"
  end
end

RSpec.describe "pushing jobs in bulk" do
  let(:redis) { TestRedis.client }

  describe "perform_bulk" do
    it "enqueues one job per argument list, in order, and returns their jids" do
      jids = ApiSpec::BulkWorker.perform_bulk([[1], [2, "b"], [{"c" => 3}]])

      jobs = queued_jobs("bulk")
      expect(jobs.map { |j| j["args"] }).to eq([[1], [2, "b"], [{"c" => 3}]])
      expect(jobs.map { |j| j["jid"] }).to eq(jids)
      expect(jids).to all(match(/\A\h{24}\z/))
      expect(jobs).to all(include("class" => "ApiSpec::BulkWorker", "queue" => "bulk", "source" => "import", "retry" => true))
      expect(redis.smembers("queues")).to eq(["bulk"])
    end

    it "pushes every batch when the list is longer than batch_size" do
      jids = ApiSpec::BulkWorker.perform_bulk((1..25).map { |i| [i] }, batch_size: 10)
      expect(jids.size).to eq(25)
      expect(queued_jobs("bulk").map { |j| j["args"].first }).to eq((1..25).to_a)
    end

    it "honours set(queue:) and set(wait:)" do
      ApiSpec::BulkWorker.set(queue: "other").perform_bulk([[1], [2]])
      ApiSpec::BulkWorker.set(wait: 600).perform_bulk([[3], [4]])

      expect(queued_jobs("other").map { |j| j["args"] }).to eq([[1], [2]])
      expect(sorted_set_jobs("schedule").map { |job, _| job["args"] }).to contain_exactly([3], [4])
    end
  end

  describe "perform_bulk with Sidekiq 8's at: and spread_interval:" do
    it "schedules each job at its own at:, across batches" do
      now = Time.now.to_f
      ats = (1..5).map { |i| now + i * 100 }
      jids = ApiSpec::BulkWorker.perform_bulk((1..5).map { |i| [i] }, at: ats, batch_size: 2)

      scheduled = sorted_set_jobs("schedule").map { |job, score| [job["jid"], job["args"].first, score] }
      expect(scheduled).to match(jids.zip(1..5, ats).map { |jid, arg, at| [jid, arg, be_within(0.001).of(at)] })
      expect(ApiSpec::BulkWorker.perform_bulk([[6], [7]], at: now + 50).size).to eq(2)
      expect(redis.zcount("schedule", now + 49, now + 51)).to eq(2)
    end

    it "spreads the jobs at random over spread_interval seconds, never less than 5" do
      before = Time.now.to_f
      ApiSpec::BulkWorker.perform_bulk((1..200).map { |i| [i] }, spread_interval: 600)
      scores = sorted_set_jobs("schedule").map(&:last)
      expect(scores.size).to eq(200)
      expect(scores).to all(be_between(before, Time.now.to_f + 600))
      expect(scores.max - scores.min).to be > 300 # spread, not one time
      expect(scores.uniq.size).to eq(200)

      redis.del("schedule")
      JobQueue::Client.push_bulk("class" => ApiSpec::BulkWorker, "args" => [[1], [2], [3]], "spread_interval" => 1)
      expect(sorted_set_jobs("schedule").map(&:last)).to all(be_between(before, Time.now.to_f + 5))
      jids = JobQueue::Client.push_bulk("class" => ApiSpec::BulkWorker, "args" => [[4], [5], [6]], "spread_interval" => 60, "batch_size" => 2)
      batched = sorted_set_jobs("schedule").map(&:first).select { |job| jids.include?(job["jid"]) }
      expect(batched.size).to eq(3)
      expect(batched).to all(satisfy { |job| !job.key?("batch_size") })
      expect(redis.zcard("schedule")).to eq(6)
    end

    it "refuses a bad spread_interval, or it with at: or set(wait:), pushing nothing" do
      expect { ApiSpec::BulkWorker.perform_bulk([[1]], spread_interval: 0) }
        .to raise_error(ArgumentError, "spread_interval must be a positive number of seconds, got 0")
      expect { ApiSpec::BulkWorker.perform_bulk([[1]], spread_interval: "60") }.to raise_error(ArgumentError, /spread_interval/)
      expect { ApiSpec::BulkWorker.perform_bulk([[1]], at: Time.now.to_f + 60, spread_interval: 60) }
        .to raise_error(ArgumentError, "ApiSpec::BulkWorker.perform_bulk takes one of at: and spread_interval:, not both")
      expect { ApiSpec::BulkWorker.set(wait: 60).perform_bulk([[1]], spread_interval: 60) }.to raise_error(ArgumentError, /not both/)
      expect { ApiSpec::BulkWorker.perform_bulk([[1], [2]], at: [Time.now.to_f + 60]) }.to raise_error(ArgumentError, /1 times for 2 jobs/)
      expect { ApiSpec::BulkWorker.perform_bulk([[1]], batch_size: 0) }.to raise_error(ArgumentError, /batch_size/)
      expect do
        JobQueue::Client.push_bulk("class" => ApiSpec::BulkWorker, "args" => [[1]], "at" => Time.now.to_f + 9, "spread_interval" => 60)
      end.to raise_error(ArgumentError, /not both/)
      expect(redis.keys("*")).to be_empty
    end
  end

  describe "JobQueue::Client.push_bulk" do
    it "schedules every job at one \"at\"" do
      at = Time.now.to_f + 900
      jids = JobQueue::Client.push_bulk("class" => ApiSpec::BulkWorker, "args" => [[1], [2]], "at" => at)

      entries = sorted_set_jobs("schedule")
      expect(entries.map { |job, _| job["jid"] }).to match_array(jids)
      expect(entries.map(&:last)).to all(be_within(0.001).of(at))
      expect(entries.map(&:first)).to all(satisfy { |j| !j.key?("at") && !j.key?("enqueued_at") })
    end

    it "gives each job its own \"at\", enqueueing those already due" do
      now = Time.now.to_f
      ats = [now + 100, now - 10, now + 200]
      jids = JobQueue::Client.push_bulk("class" => ApiSpec::BulkWorker, "args" => [["a"], ["b"], ["c"]], "at" => ats)

      expect(jids.size).to eq(3)
      scheduled = sorted_set_jobs("schedule").map { |job, score| [job["args"].first, score] }
      expect(scheduled).to match([["a", be_within(0.001).of(now + 100)], ["c", be_within(0.001).of(now + 200)]])
      expect(queued_jobs("bulk").map { |j| j["args"] }).to eq([["b"]])
    end

    it "takes \"at\" as a Time too, one or one per job, as push does" do
      t = Time.now + 600
      jids = JobQueue::Client.push_bulk("class" => ApiSpec::BulkWorker, "args" => [[1], [2]], "at" => [t, t + 60])
      expect(sorted_set_jobs("schedule").map { |job, score| [job["jid"], score] })
        .to match([[jids[0], be_within(0.001).of(t.to_f)], [jids[1], be_within(0.001).of(t.to_f + 60)]])
      JobQueue::Client.push("class" => ApiSpec::BulkWorker, "args" => [3], "at" => t)
      expect(redis.zcard("schedule")).to eq(3)
      expect { JobQueue::Client.push_bulk("class" => ApiSpec::BulkWorker, "args" => [[1]], "at" => "soon") }
        .to raise_error(ArgumentError, /"at" must be a Time or Numeric epoch seconds, got "soon"/)
    end

    it "refuses an \"at\" list of the wrong length, and args that are not lists" do
      expect do
        JobQueue::Client.push_bulk("class" => ApiSpec::BulkWorker, "args" => [[1], [2]], "at" => [Time.now.to_f])
      end.to raise_error(ArgumentError, /at/)
      expect { JobQueue::Client.push_bulk("class" => ApiSpec::BulkWorker, "args" => [1, 2]) }.to raise_error(ArgumentError, /Array of Arrays/)
      expect(redis.keys("*")).to be_empty
    end

    it "accepts a class name, a queue and symbol keys" do
      JobQueue::Client.push_bulk(class: "Remote::Worker", args: [[1], [2]], queue: "remote")
      expect(queued_jobs("remote")).to all(include("class" => "Remote::Worker", "queue" => "remote"))
      expect(queued_jobs("remote").size).to eq(2)
    end

    it "writes nothing when one job's arguments are not JSON-native" do
      expect do
        JobQueue::Client.push_bulk("class" => ApiSpec::BulkWorker, "args" => [[1], [:two], [3]])
      end.to raise_error(ArgumentError, /args\[0\]/)
      expect(redis.keys("*")).to be_empty
    end
  end
end
