# frozen_string_literal: true

require "open3"

# `require "queue/rspec"`'s shared example, run as users run it: rspec in a subprocess on the fixture
# specs of spec/fixtures/idempotent.
RSpec.describe "the 'an idempotent worker' shared example" do
  def rspec(file)
    fixtures = File.expand_path("../fixtures/idempotent", __dir__)
    Open3.capture2e(RbConfig.ruby, "-S", "rspec", "--no-color", File.join(fixtures, file), chdir: fixtures)
  end

  it "passes for an idempotent worker, running the job for real" do
    output, status = rspec("idempotent_worker_example.rb")
    expect(status.success?).to be(true), output
    expect(output).to include("6 examples, 0 failures")
  end

  it "fails for a worker that is not declared idempotent!, saying why" do
    output, status = rspec("non_idempotent_worker_example.rb")
    expect(status.success?).to be(false)
    expect(output).to include("2 examples, 1 failure")
    expect(output).to include("CounterWorker is not declared idempotent: 'an idempotent worker' checks workers that call `idempotent!`")
  end
end
