# frozen_string_literal: true

require "queue/cli"
require "tmpdir"

RSpec.describe JobQueue::CLI do
  exe = File.join(ServerProcess::ROOT, "exe", "queue")

  # Runs exe/queue to its exit (killing it if it has not exited within 30 s): [status, stdout, stderr].
  def run_exe(exe, *args)
    Dir.mktmpdir("queue-cli") do |dir|
      out = File.join(dir, "out")
      err = File.join(dir, "err")
      pid = Process.spawn({"REDIS_URL" => TestRedis.url}, RbConfig.ruby, exe, *args, out: out, err: err, chdir: dir)
      status = nil
      begin
        status = wait_until("exe/queue #{args.join(" ")} to exit") { Process.wait2(pid, Process::WNOHANG)&.last }
      ensure
        Process.kill("KILL", pid) && Process.wait(pid) unless status
      end
      [status, File.read(out), File.read(err)]
    end
  end

  describe "exe/queue" do
    it "prints the version with -V and exits 0" do
      status, out, = run_exe(exe, "-V")
      expect(status.exitstatus).to eq(0)
      expect(out).to eq("queue #{JobQueue::VERSION}\n")
    end

    it "prints usage with -h and exits 0" do
      status, out, = run_exe(exe, "-h")
      expect(status.exitstatus).to eq(0)
      expect(out).to start_with("Usage: queue [options]")
      expect(out).to include("--concurrency", "--queue", "--require", "--timeout", "--config", "--environment", "--tag", "--version")
    end

    it "exits non-zero on an unknown flag, saying which" do
      status, out, err = run_exe(exe, "--frobnicate")
      expect(status.exitstatus).not_to eq(0)
      expect(err).to eq("queue: invalid option: --frobnicate\n")
      expect(out).to be_empty
    end

    it "exits non-zero on a flag value of the wrong type" do
      status, _, err = run_exe(exe, "-c", "many")
      expect(status.exitstatus).not_to eq(0)
      expect(err).to include("invalid argument: -c many")
    end

    it "exits non-zero when -r names a file that does not exist" do
      status, _, err = run_exe(exe, "-r", "/nonexistent/queue-app.rb")
      expect(status.exitstatus).not_to eq(0)
      expect(err).to eq("queue: cannot load /nonexistent/queue-app.rb: no such file or directory\n")
    end

    it "exits non-zero when -C names a file that does not exist" do
      status, _, err = run_exe(exe, "-C", "/nonexistent/queue.yml")
      expect(status.exitstatus).not_to eq(0)
      expect(err).to include("config file /nonexistent/queue.yml does not exist")
    end
  end

  describe "#parse with a Sidekiq YAML file" do
    around do |example|
      Dir.mktmpdir("queue-cli-config") do |dir|
        @config_file = File.join(dir, "sidekiq.yml")
        File.write(@config_file, <<~YAML)
          ---
          :concurrency: 5
          :timeout: 8
          :tag: <%= "from" + "-erb" %>
          :queues:
            - critical
            - [default, 2]
            - [low, 1]
          production:
            :concurrency: 20
            :queues:
              - [urgent, 3]
              - default
        YAML
        example.run
      end
    end

    let(:cli) { described_class.new(out: StringIO.new) }

    it "reads the top-level settings, [name, weight] queues included" do
      expect(cli.parse(["-C", @config_file])).to include(
        concurrency: 5, timeout: 8, tag: "from-erb", queues: ["critical", "default,2", "low,1"]
      )
    end

    it "lets the -e environment's section override them" do
      options = cli.parse(["-C", @config_file, "-e", "production"])
      expect(options).to include(concurrency: 20, timeout: 8, queues: ["urgent,3", "default"], environment: "production")
      expect(options).not_to have_key(:production)
    end

    it "lets flags win over the file" do
      options = cli.parse(["-C", @config_file, "-e", "production", "-c", "3", "-q", "only,2", "-q", "also", "-t", "4"])
      expect(options).to include(concurrency: 3, timeout: 4.0, queues: ["only,2", "also"])
    end

    it "yields queues that the configuration accepts" do
      config = JobQueue::Configuration.new
      config.queues = cli.parse(["-C", @config_file])[:queues]
      expect(config.queues).to eq([["critical", 1], ["default", 2], ["low", 1]])
    end
  end
end
