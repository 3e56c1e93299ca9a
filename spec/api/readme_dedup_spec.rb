# frozen_string_literal: true

require "open3"

# README "GitLab-style deduplication": the worker and its pushes run as written against the test
# Redis, the feature-flag commands turn its dropping off and on again, and its RSpec example runs as
# written in an rspec process of its own (spec/fixtures/readme/idempotent_worker_example.rb), on the
# app models it names.
RSpec.describe "README: GitLab-style deduplication" do
  let(:worker) { Readme.blocks("## GitLab-style deduplication", count: 2).first }
  let(:commands) { Readme.blocks("## GitLab-style deduplication", lang: "", count: 1).first.code.lines }

  def rspec_example(env = {})
    fixtures = File.expand_path("../fixtures/readme", __dir__)
    Open3.capture2e({"REDIS_URL" => TestRedis.url}.merge(env), RbConfig.ruby, "-S", "rspec", "--no-color",
      File.join(fixtures, "idempotent_worker_example.rb"), chdir: fixtures)
  end

  # The worker's class, then each push line's [return value, the value its comment shows].
  def declare_and_push
    definition, pushes = worker.code.lines.partition { |line| !line.include?("# =>") }
    TOPLEVEL_BINDING.eval(definition.join, Readme::PATH, worker.line)
    pushes.map { |line| [TOPLEVEL_BINDING.eval(line.split("# =>").first), line[/# =>\s*(\S+)/, 1]] }
  end

  # A `bundle exec queue ...` line of the README (its comment left out) run by this checkout's exe/queue.
  def queue_command(line)
    args = line.sub(/#.*/, "").split
    expect(args.shift(3)).to eq(%w[bundle exec queue])
    output, status = Open3.capture2e({"REDIS_URL" => TestRedis.url}, RbConfig.ruby, File.join(ServerProcess::ROOT, "exe", "queue"), *args)
    expect(status.success?).to be(true), output
    output
  end

  after { Object.send(:remove_const, :AuthorizedProjectsWorker) if Object.const_defined?(:AuthorizedProjectsWorker, false) }

  it "declares the worker; the second push of the same arguments is dropped, as shown" do
    (first, shown_first), (second, shown_second) = declare_and_push
    expect([shown_first, shown_second]).to eq(['"jid…"', "nil:"])
    expect(first).to match(/\A\h{24}\z/)
    expect(second).to be_nil
    expect(queued_jobs("authorized_projects").map { |j| j["jid"] }).to eq([first])
  end

  it "turns dropping off for the worker's queue with the feature commands (list shows it), and on again" do
    expect(commands.size).to eq(3)
    queue_command(commands[0])
    expect(queue_command(commands[2])).to eq("disable_authorized_projects_deduplication=1\n")
    first, second = declare_and_push.map(&:first)
    expect([first, second]).to all(match(/\A\h{24}\z/))
    queue_command(commands[1])
    expect(declare_and_push.map(&:first)).to eq([nil, nil]) # the first job still holds the key
    expect(queued_jobs("authorized_projects").map { |j| [j["jid"], j["duplicate-of"]] }).to eq([[first, nil], [second, first]])
    expect(queue_command(commands[2])).to eq("")
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
