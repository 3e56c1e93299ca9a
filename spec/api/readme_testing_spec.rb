# frozen_string_literal: true

require "open3"

# README "Test modes": the spec_helper it gives, OrderSyncWorker and its 'an ordered worker' example run
# as written, in an rspec process of their own (spec/fixtures/readme/ordered_worker_example.rb), on the
# app model they name.
RSpec.describe "README: Test modes" do
  def rspec_example
    fixtures = File.expand_path("../fixtures/readme", __dir__)
    Open3.capture2e({"REDIS_URL" => TestRedis.url}, RbConfig.ruby, "-S", "rspec", "--no-color",
      File.join(fixtures, "ordered_worker_example.rb"), chdir: fixtures)
  end

  it "runs the ordered worker's RSpec example as written: the shared example and the README's own example pass" do
    output, status = rspec_example
    expect(status.success?).to be(true), output
    expect(output).to include("4 examples, 0 failures")
    expect(TestRedis.client.keys("*")).to eq([])
  end
end
