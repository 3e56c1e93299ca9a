# frozen_string_literal: true

require "open3"

# README "GitLab-style deduplication": the worker and its pushes run as written against the test
# Redis, and its RSpec example runs as written in an rspec process of its own
# (spec/fixtures/readme/idempotent_worker_example.rb), on the app models it names.
RSpec.describe "README: GitLab-style deduplication" do
  let(:worker) { Readme.blocks("## GitLab-style deduplication", count: 2).first }

  def rspec_example(env = {})
    fixtures = File.expand_path("../fixtures/readme", __dir__)
    Open3.capture2e({"REDIS_URL" => TestRedis.url}.merge(env), RbConfig.ruby, "-S", "rspec", "--no-color",
      File.join(fixtures, "idempotent_worker_example.rb"), chdir: fixtures)
  end

  after { Object.send(:remove_const, :AuthorizedProjectsWorker) if Object.const_defined?(:AuthorizedProjectsWorker, false) }

  it "declares the worker; the second push of the same arguments is dropped, as shown" do
    definition, pushes = worker.code.lines.partition { |line| !line.include?("# =>") }
    TOPLEVEL_BINDING.eval(definition.join, Readme::PATH, worker.line)
    expect(pushes.map { |line| line[/# =>\s*(\S+)/, 1] }).to eq(['"jid…"', "nil:"])
    first, second = pushes.map { |line| TOPLEVEL_BINDING.eval(line.split("# =>").first) }
    expect(first).to match(/\A\h{24}\z/)
    expect(second).to be_nil
    expect(TestRedis.client.lrange("queue:default", 0, -1).map { |j| JSON.parse(j)["jid"] }).to eq([first])
  end

  it "runs the RSpec example as written: the shared example and the README's own example pass" do
    output, status = rspec_example
    expect(status.success?).to be(true), output
    expect(output).to include("3 examples, 0 failures")
  end

  it "fails the README's own example for a model that grants a project again on each run" do
    output, status = rspec_example("AUTHORIZE" => "create")
    expect(status.success?).to be(false)
    expect(output).to include("3 examples, 1 failure", "once, though the job ran twice", "expected: 2", "got: 4")
  end
end
