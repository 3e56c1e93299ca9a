# frozen_string_literal: true

require "json"
require "open3"
require "stringio"
require "tmpdir"
require "queue/cli"
require_relative "compat_helper"

# Our CLI reads -q flags and a YAML file's :queues: as Sidekiq 6.4.1's own CLI does: the same queues
# with the same weights, and strict order in exactly the same cases. Sidekiq's reading is its
# `Sidekiq.options` after `Sidekiq::CLI#parse`: each queue listed weight times, and `:strict`.
RSpec.describe "queue flags read as Sidekiq 6.4.1 reads them" do
  # Run in a process of its own: once sidekiq/cli is loaded, Sidekiq takes its process for a server
  # and skips the `configure_client` blocks the other compat specs rely on.
  let(:sidekiq_parse) do
    <<~RUBY
      require "json"
      require "sidekiq/cli"
      Sidekiq::CLI.instance.parse(ARGV)
      puts JSON.generate(Sidekiq.options.values_at(:queues, :strict))
    RUBY
  end

  # An existing file for -r (Sidekiq's parse checks that it exists; neither CLI loads it here).
  let(:app) { File.join(ServerProcess::APPS, "basic.rb") }

  def sidekiq_reads(argv)
    out, err, status = Open3.capture3(RbConfig.ruby, "-e", sidekiq_parse, "--", "-r", app, *argv, chdir: ServerProcess::ROOT)
    raise "Sidekiq::CLI#parse failed: #{err}" unless status.success?

    JSON.parse(out)
  end

  def our_reads(argv)
    config = JobQueue::Configuration.new
    queues = JobQueue::CLI.new(out: StringIO.new).parse(["-r", app, *argv])[:queues]
    config.queues = queues if queues
    [config.queues.flat_map { |name, weight| [name] * weight }, config.strict_order?]
  end

  [
    [],
    %w[-q a -q b],
    %w[-q a,1 -q b,1],
    %w[-q a,3 -q b],
    %w[-q a,0 -q b],
    %w[-q a,0 -q b,2],
    %w[-q a,2 -q b,0 -q c,1]
  ].each do |argv|
    it "reads #{argv.empty? ? "no flags" : argv.join(" ")} alike" do
      expect(our_reads(argv)).to eq(sidekiq_reads(argv))
    end
  end

  {
    "[name, weight] pairs" => "  - [a, 1]\n  - [b, 2]\n  - c\n",
    "weight 0 alone" => "  - [a, 0]\n  - b\n",
    "no weights" => "  - a\n  - b\n"
  }.each do |what, entries|
    it "reads a YAML file's :queues: with #{what} alike" do
      Dir.mktmpdir("queue-compat-options") do |dir|
        file = File.join(dir, "sidekiq.yml")
        File.write(file, ":queues:\n#{entries}")
        expect(our_reads(["-C", file])).to eq(sidekiq_reads(["-C", file]))
      end
    end
  end
end
