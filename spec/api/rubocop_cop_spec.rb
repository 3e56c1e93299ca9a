# frozen_string_literal: true

require "open3"
require "json"

# Debian's rubocop, run as an app runs it, on spec/fixtures/rubocop_app (whose .rubocop.yml says
# `require: queue/rubocop`); the gem's lib is on RUBYLIB as Bundler would put it.
RSpec.describe "the JobQueue/IdempotentWorker cop" do
  app = File.expand_path("../fixtures/rubocop_app", __dir__)
  lib = File.join(ServerProcess::ROOT, "lib")

  def offenses_by_file(app, lib, *args)
    out, err, status = Open3.capture3({"RUBYLIB" => lib}, "rubocop", "--cache", "false", "--format", "json", *args, chdir: app)
    expect(status.exitstatus).to be <= 1, "rubocop failed (#{status.exitstatus}): #{err}"
    JSON.parse(out)["files"].to_h do |file|
      ours = file["offenses"].select { |o| o["cop_name"].start_with?("JobQueue/") }
      [File.basename(file["path"]), ours.map { |o| [o["cop_name"], o["message"], o["location"]["line"]] }]
    end
  rescue Errno::ENOENT
    raise "rubocop is not installed (apt-get install -y rubocop; bin/setup-deps installs it)"
  end

  let(:message) do
    "Declare the worker `idempotent!` (it may run more than once), or disable JobQueue/IdempotentWorker " \
      "with a reason: `# rubocop:disable JobQueue/IdempotentWorker -- <why>`."
  end

  it "reports workers that include ApplicationWorker without idempotent! or a reasoned disable, and only them" do
    offenses = offenses_by_file(app, lib)
    cop = "JobQueue/IdempotentWorker"

    expect(offenses.fetch("offending_worker.rb")).to eq([[cop, message, 3]])
    expect(offenses.fetch("namespaced_offending_worker.rb")).to eq([[cop, message, 4]])
    expect(offenses.fetch("unreasoned_worker.rb")).to eq([[cop, message, 3]])
    %w[idempotent_worker.rb self_idempotent_worker.rb reasoned_inline_worker.rb reasoned_block_worker.rb plain_worker.rb].each do |file|
      expect(offenses.fetch(file)).to eq([]), "#{file}: #{offenses[file].inspect}"
    end
  end

  it "exits 0 on an app whose workers all comply" do
    files = %w[idempotent_worker.rb reasoned_inline_worker.rb reasoned_block_worker.rb plain_worker.rb].map { |f| "app/workers/#{f}" }
    _out, err, status = Open3.capture3({"RUBYLIB" => lib}, "rubocop", "--cache", "false", *files, chdir: app)
    expect([status.exitstatus, err]).to eq([0, ""])
  end
end
