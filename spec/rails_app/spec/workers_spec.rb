# frozen_string_literal: true

RSpec.describe IdempotentWorker do
  let(:job_args) { ["k1", 7] }

  it_behaves_like "an idempotent worker" do
    it "leaves one row however many times it runs" do
      perform_idempotent_work
      expect(Entry.where(kind: "idempotent").pluck(:key, :value)).to eq([["k1", 7]])
    end
  end
end

RSpec.describe PlainWorker do
  it "waits in the fake queue until drained" do
    PlainWorker.perform_async("p", 1)
    expect(PlainWorker.jobs.size).to eq(1)
    expect(Entry.count).to eq(0)
    PlainWorker.drain
    expect(Entry.pluck(:kind, :key, :value)).to eq([["plain", "p", 1]])
  end

  it "runs at once in inline mode" do
    JobQueue::Testing.inline! { PlainWorker.perform_async("q", 2) }
    expect(Entry.pluck(:kind, :key, :value)).to eq([["plain", "q", 2]])
  end
end

RSpec.describe RecordJob do
  it "goes through the :queue adapter in Sidekiq's ActiveJob form" do
    RecordJob.perform_later("a", 3)
    job = JobQueue::Worker.jobs.last
    expect(job).to include("class" => "ActiveJob::QueueAdapters::SidekiqAdapter::JobWrapper", "wrapped" => "RecordJob", "queue" => "mailers")
    JobQueue::Worker.drain_all
    expect(Entry.pluck(:kind, :key, :value)).to eq([["active_job", "a", 3]])
  end
end
