# frozen_string_literal: true

module ApiSpec
  class OptionsWorker
    include JobQueue::Worker
    sidekiq_options queue: :critical, retry: 5, retry_queue: "slow", backtrace: 10, dead: false,
      tags: ["billing"], "tenant" => "acme"
  end

  class ParentWorker
    include JobQueue::Worker
    sidekiq_options queue: "parent", retry: 3, "team" => "core"
    sidekiq_retry_in { |count| count * 2 }
  end

  class ChildWorker < ParentWorker
    sidekiq_options retry: false
  end

  class PlainWorker
    include JobQueue::Worker
  end

  class RenamedJob
    include JobQueue::Job
    sidekiq_options queue: "renamed"
  end
end

RSpec.describe "JobQueue::Worker sidekiq_options" do
  it "keeps every option, with the queue as a String" do
    expect(ApiSpec::OptionsWorker.get_sidekiq_options).to eq(
      "queue" => "critical", "retry" => 5, "retry_queue" => "slow", "backtrace" => 10, "dead" => false,
      "tags" => ["billing"], "tenant" => "acme"
    )
  end

  it "writes the options, custom keys included, into each job" do
    ApiSpec::OptionsWorker.perform_async(1)
    job = queued_jobs("critical").first
    expect(job).to include(
      "class" => "ApiSpec::OptionsWorker", "queue" => "critical", "retry" => 5, "retry_queue" => "slow",
      "backtrace" => 10, "dead" => false, "tags" => ["billing"], "tenant" => "acme"
    )
  end

  it "defaults to the default queue with retries on" do
    expect(ApiSpec::PlainWorker.get_sidekiq_options).to eq("retry" => true, "queue" => "default")
  end

  it "merges repeated declarations" do
    klass = Class.new do
      include JobQueue::Worker
      sidekiq_options queue: "a"
      sidekiq_options retry: 2
    end
    expect(klass.get_sidekiq_options).to include("queue" => "a", "retry" => 2)
  end

  describe "inheritance" do
    it "gives a subclass its parent's options under its own" do
      expect(ApiSpec::ChildWorker.get_sidekiq_options).to eq("queue" => "parent", "retry" => false, "team" => "core")
    end

    it "leaves the parent's options alone" do
      expect(ApiSpec::ParentWorker.get_sidekiq_options).to include("retry" => 3)
    end

    it "inherits the sidekiq_retry_in block" do
      expect(ApiSpec::ChildWorker.sidekiq_retry_in_block.call(4)).to eq(8)
    end

    it "pushes a subclass's jobs with the merged options" do
      ApiSpec::ChildWorker.perform_async
      expect(queued_jobs("parent").first).to include("class" => "ApiSpec::ChildWorker", "retry" => false, "team" => "core")
    end
  end

  describe "invalid values" do
    {
      queue: [""],
      retry: [-1, "yes", 1.5, nil],
      retry_queue: [3],
      backtrace: [-2, "all"],
      dead: ["no", nil],
      tags: ["billing"],
      retry_for: ["1h", -1, nil]
    }.each do |option, values|
      values.each do |value|
        it "refuses #{option}: #{value.inspect} when the class is declared" do
          expect do
            Class.new do
              include JobQueue::Worker
              sidekiq_options option => value
            end
          end.to raise_error(ArgumentError, /#{option}/)
        end
      end
    end

    # Sidekiq 6.4.1 checks none of these at set() (job_util.rb validates class, args, at and tags
    # only) and pushes `retry: "bogus"`, which its server then reads as "retry with the default
    # count"; ours refuses it at the call, as our sidekiq_options does (a deliberate difference).
    it "refuses set(retry: \"bogus\") at the call, naming the option, and pushes nothing" do
      expect { ApiSpec::PlainWorker.set(retry: "bogus") }
        .to raise_error(ArgumentError, 'ApiSpec::PlainWorker.set: invalid option retry: "bogus"')
      expect { ApiSpec::PlainWorker.set(queue: "ok").set("backtrace" => "all") }
        .to raise_error(ArgumentError, 'ApiSpec::PlainWorker.set: invalid option backtrace: "all"')
      expect(TestRedis.client.keys("*")).to be_empty
    end

    it "takes valid set() options and keys it does not know, as Sidekiq" do
      ApiSpec::PlainWorker.set(retry: 2, queue: :low, "custom" => {"x" => 1}).perform_async
      expect(queued_jobs("low").first).to include("retry" => 2, "queue" => "low", "custom" => {"x" => 1})
    end

    it "refuses JobQueue::Worker in a module" do
      expect { Module.new { include JobQueue::Worker } }.to raise_error(ArgumentError, /class/)
    end
  end

  it "offers JobQueue::Job as another name of JobQueue::Worker" do
    expect(JobQueue::Job).to equal(JobQueue::Worker)
    ApiSpec::RenamedJob.perform_async("x")
    expect(queued_jobs("renamed").first).to include("class" => "ApiSpec::RenamedJob", "args" => ["x"])
  end
end
