# frozen_string_literal: true

require "tmpdir"
require_relative "compat_helper"

# Sidekiq 6.4.1's CLI (cli.rb) habits, run side by side: `sidekiq` and `exe/queue` with the same
# flags in the same directory, to their exit.
RSpec.describe "the CLI as Sidekiq 6.4.1's", :compat do
  # [status, stdout + stderr] of a command run in `dir` (killed if it has not exited within 30 s).
  def run_in(dir, *command)
    log = File.join(dir, "out-#{Process.clock_gettime(Process::CLOCK_MONOTONIC, :nanosecond)}")
    pid = Process.spawn({"REDIS_URL" => TestRedis.url}, *command, chdir: dir, out: log, err: [:child, :out])
    status = nil
    begin
      status = wait_until("#{command.last(2).join(" ")} to exit") { Process.wait2(pid, Process::WNOHANG)&.last }
    ensure
      Process.kill("KILL", pid) && Process.wait(pid) unless status
    end
    [status, File.read(log)]
  end

  def ours(dir, *args) = run_in(dir, RbConfig.ruby, File.join(ServerProcess::ROOT, "exe", "queue"), *args)

  def sidekiqs(dir, *args) = run_in(dir, RbConfig.ruby, "-S", "sidekiq", *args)

  # cli.rb validate!: no -r and no config/application.rb in the directory.
  it "exits 1 with the guidance to point it at the app when there is nothing to load" do
    Dir.mktmpdir("cli-no-app") do |dir|
      their_status, their_out = sidekiqs(dir)
      our_status, our_out = ours(dir)

      expect(our_status.exitstatus).to eq(1)
      expect(our_status.exitstatus).to eq(their_status.exitstatus)
      expect(their_out).to include("Please point Sidekiq to a Rails application or a Ruby file", "to load your worker classes with -r [DIR|FILE].")
      expect(our_out).to include("Please point queue to a Rails application or a Ruby file", "to load your job classes with -r [DIR|FILE].")
      expect(our_out).to include("Usage: queue [options]", "--require")
      expect(redis.smembers("processes")).to be_empty
    end
  end

  # cli.rb option_parser: -d, -L PATH and -P PATH print why they were removed in 6.0 and parsing goes
  # on (here to -V, which prints the version and exits 0).
  it "prints Sidekiq's removal notes for -d, -L and -P and carries on" do
    Dir.mktmpdir("cli-removed") do |dir|
      flags = ["-d", "-L", File.join(dir, "log"), "-P", File.join(dir, "pid"), "-V"]
      their_status, their_out = sidekiqs(dir, *flags)
      our_status, our_out = ours(dir, *flags)

      expect([our_status.exitstatus, their_status.exitstatus]).to eq([0, 0])
      their_notes = their_out.lines.grep(/^ERROR:/)
      our_notes = our_out.lines.grep(/^ERROR:/)
      expect(their_notes.size).to eq(3)
      expect(our_notes).to eq(their_notes.map { |line| line.sub("Sidekiq will only log", "queue will only log") })
      expect(our_out.lines.last).to eq("queue #{JobQueue::VERSION}\n")
      expect(Dir.children(dir).grep(/\A(log|pid)\z/)).to be_empty
    end
  end

  # cli.rb parse_config merges every YAML key into Sidekiq.options; :labels: reach the process hash
  # (launcher.rb). Ours takes :labels: the same way and warns about each key it does not use.
  it "takes :labels: from the YAML file into the process hash, and warns about :max_retries: and unknown keys" do
    Dir.mktmpdir("cli-yaml") do |dir|
      config = File.join(dir, "sidekiq.yml")
      File.write(config, <<~YAML)
        :concurrency: 2
        :labels:
          - blue
          - canary
        :max_retries: 7
        :frobnicate: true
        production:
          :concurrency: 9
      YAML
      sidekiq = sidekiq_server(args: ["-C", config])
      ours = our_server(args: ["-C", config])
      their_labels = sidekiq_process_of(sidekiq)["labels"]
      our_labels = sidekiq_process_of(ours)["labels"]

      expect(our_labels).to eq(their_labels)
      expect(our_labels).to eq(%w[blue canary])
      expect(ours.output).to include(
        "config file #{config}: :max_retries: ignored (the retry limit is the job's: use sidekiq_options retry: N, or config.default_job_options = {retry: N})",
        "config file #{config}: :frobnicate: ignored (not an option of queue)"
      )
      expect(ours.output).not_to include(":production:", ":labels: ignored", ":concurrency: ignored")
    end
  end
end
