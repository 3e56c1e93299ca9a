# frozen_string_literal: true

RSpec.describe "enqueueing an anonymous worker class" do
  it "raises ArgumentError at the call and writes nothing" do
    worker = Class.new { include JobQueue::Worker }
    expect { worker.perform_async(1) }.to raise_error(ArgumentError, /anonymous class/)
    expect(TestRedis.client.keys("*")).to be_empty
  end
end
