# frozen_string_literal: true

# JobQueue::Timestamp: a job time in either form, Sidekiq 8's rule (Float seconds, Integer milliseconds).
RSpec.describe JobQueue::Timestamp do
  it "reads float seconds and Sidekiq 8's integer milliseconds as the same instant" do
    expect(described_class.time(1763985600123)).to eq(Time.utc(2025, 11, 24, 12, 0, 0.123r))
    expect(described_class.time(1763985600.5)).to eq(Time.utc(2025, 11, 24, 12, 0, 0.5r))
    expect(described_class.seconds(1763985600123)).to eq(1763985600.123)
    expect(described_class.seconds(1763985600.5)).to eq(1763985600.5)
  end

  it "takes an integer too small to be milliseconds of this era as seconds, and nothing else as a time" do
    expect(described_class.time(1763985600)).to eq(Time.utc(2025, 11, 24, 12))
    expect([described_class.time(nil), described_class.time("1763985600"), described_class.seconds(nil)]).to eq([nil, nil, nil])
  end

  it "writes a time in the job's own form" do
    expect(described_class.for_job({"created_at" => 1763985600123}, 1763985601.2345)).to eq(1763985601234)
    expect(described_class.for_job({"created_at" => 1763985600.5}, 1763985601.25)).to eq(1763985601.25)
    expect(described_class.for_job({"enqueued_at" => 1763985600123}, 1.5)).to eq(1500)
  end
end
