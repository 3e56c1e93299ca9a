# frozen_string_literal: true

require "queue/cli"
require "tmpdir"

RSpec.describe JobQueue::CLI do
  exe = File.join(ServerProcess::ROOT, "exe", "queue")

  # Runs exe/queue to its exit (killing it if it has not exited within 30 s): [status, stdout, stderr].
  def run_exe(exe, *args, env: {})
    Dir.mktmpdir("queue-cli") do |dir|
      out = File.join(dir, "out")
      err = File.join(dir, "err")
      pid = Process.spawn({"REDIS_URL" => TestRedis.url, **env}, RbConfig.ruby, exe, *args, out: out, err: err, chdir: dir)
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

    it "shows each option's default and how weights order the queues in -h" do
      _, out, = run_exe(exe, "-h")
      expect(out).to match(/--concurrency INT .*\(default 10\)/)
      expect(out).to match(/--timeout NUM .*\(default 25\)/)
      expect(out).to match(/--queue QUEUE\[,WEIGHT\] .*\(default "default"\)/)
      expect(out).to match(/--max-batch INT .*1\.\.1000 \(default 100\)/)
      expect(out).to match(/--require .*\(default \.\)/)
      expect(out).to include("strict order", "a,1 b,1 share evenly")
    end

    it "exits non-zero on a --max-batch outside 1..1000, saying so" do
      status, _, err = run_exe(exe, "--max-batch", "0")
      expect(status.exitstatus).not_to eq(0)
      expect(err).to eq("queue: invalid argument: --max-batch 0 (must be 1..1000)\n")
    end

    it "exits non-zero on a badly weighted queue, naming it" do
      status, _, err = run_exe(exe, "-q", "a,-1")
      expect(status.exitstatus).not_to eq(0)
      expect(err).to eq("queue: queue weight must be a whole number from 0 to 1000000, got \"-1\" (in \"a,-1\")\n")
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

  # Issue #24, point 8: what a new user's first mistakes print.
  describe "exe/queue's error messages" do
    app = File.join(ServerProcess::APPS, "basic.rb")

    # Runs exe/queue with `yaml` as its -C file.
    def run_with_config(exe, yaml)
      Dir.mktmpdir("queue-cli-yaml") do |dir|
        file = File.join(dir, "queue.yml")
        File.write(file, yaml)
        [file, *run_exe(exe, "-C", file)]
      end
    end

    it "names the file, line and column of a YAML syntax error, without a backtrace" do
      file, status, out, err = run_with_config(exe, ":concurrency: 2\n:queues: [critical\n")
      expect(status.exitstatus).to eq(1)
      expect(err).to eq("queue: config file #{file} is not valid YAML: did not find expected ',' or ']' " \
        "while parsing a flow sequence at line 2 column 10\n")
      expect(out).to be_empty
    end

    it "names the file and line of an error its ERB raised" do
      file, status, _, err = run_with_config(exe, ":concurrency: 2\n:tag: <%= ENV.fetch(\"QUEUE_SPEC_UNSET\") %>\n")
      expect(status.exitstatus).to eq(1)
      expect(err).to eq("queue: config file #{file}:2: its ERB raised KeyError: key not found: \"QUEUE_SPEC_UNSET\"\n")
    end

    it "points :queues: written on one line at YAML's list form" do
      file, status, _, err = run_with_config(exe, ":queues: critical, default\n")
      expect(status.exitstatus).to eq(1)
      expect(err).to eq(<<~TEXT)
        queue: config file #{file}: `:queues: critical, default` is one string in YAML, not a list of queues; write one queue per line:
        :queues:
          - critical
          - default
        (or [name, weight] per line, e.g. "  - [critical, 2]")
      TEXT
    end

    it "names the URL schemes it accepts for an http:// URL" do
      status, out, err = run_exe(exe, "-r", app, env: {"REDIS_URL" => "http://127.0.0.1:6379/0"})
      expect(status.exitstatus).to eq(1)
      expect(err).to eq("queue: invalid Redis URL \"http://127.0.0.1:6379/0\": http:// is not a Redis scheme; use " \
        "redis://[:PASSWORD@]HOST[:PORT][/DB], rediss://… for TLS, or unix:///PATH/TO/SOCKET[?db=DB]\n")
      expect(out).to be_empty
    end

    it "says what Redis said when it has no password and was sent one" do
      url = "#{TestRedis.url}?pass=not-configured"
      status, out, err = run_exe(exe, "-r", app, env: {"REDIS_URL" => url})
      expect(status.exitstatus).to eq(1)
      expect(err).to start_with("queue: Redis at #{TestRedis.url}?pass=**** has no password configured but was sent one " \
        "(Redis said: ERR AUTH <password> called without any password configured for the default user.")
      expect(err).to include("remove the password from config.redis = {password: ...} or the URL")
      expect(err).not_to include("WRONGPASS", "not-configured")
      expect(out).to be_empty
    end

    it "prints a failed start once, with no quiet or stopped lines for a server that never ran" do
      refused = "redis://127.0.0.1:#{free_port}/0"
      status, out, err = run_exe(exe, "-r", app, env: {"REDIS_URL" => refused})
      expect(status.exitstatus).to eq(1)
      expect(err.lines).to eq(["queue: Redis at #{refused} refused the connection (Connection refused (os error 111)): " \
        "is redis-server running there? Set REDIS_URL or config.redis = {url: ...}\n"])
      expect(out).to be_empty
    end

    it "lists every subcommand in --help" do
      _, out, = run_exe(exe, "--help")
      usage = out.lines.take_while { |line| !line.start_with?("    -") }
      %w[cluster migrate stats retry dead morgue web feature ordered].each do |command|
        expect(usage.grep(/^\s*queue\b.*\b#{command}\b/)).not_to be_empty, "#{command} missing from:\n#{usage.join}"
      end
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
          :max_batch: 40
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
        concurrency: 5, timeout: 8, max_batch: 40, tag: "from-erb", queues: ["critical", ["default", 2], ["low", 1]]
      )
    end

    it "lets the -e environment's section override them" do
      options = cli.parse(["-C", @config_file, "-e", "production"])
      expect(options).to include(concurrency: 20, timeout: 8, queues: [["urgent", 3], "default"], environment: "production")
      expect(options).not_to have_key(:production)
    end

    it "lets flags win over the file" do
      options = cli.parse(["-C", @config_file, "-e", "production", "-c", "3", "-q", "only,2", "-q", "also", "-t", "4", "--max-batch", "7"])
      expect(options).to include(concurrency: 3, timeout: 4.0, max_batch: 7, queues: ["only,2", "also"])
    end

    it "leaves routing_rules: to the Rails integration, without a warning" do
      log = StringIO.new
      JobQueue.config.logger = Logger.new(log)
      File.write(@config_file, "#{File.read(@config_file)}routing_rules:\n  - [\"*\", default]\nfrobnicate: [1]\n")

      expect(cli.parse(["-C", @config_file])).not_to have_key(:routing_rules)
      expect(log.string).to include(":frobnicate: ignored")
      expect(log.string).not_to include("routing_rules")
    end

    it "yields queues that the configuration accepts" do
      config = JobQueue::Configuration.new
      config.queues = cli.parse(["-C", @config_file])[:queues]
      expect([config.queues, config.strict_order?]).to eq([[["critical", 1], ["default", 2], ["low", 1]], false])
    end
  end

  describe "#parse of -q into the configuration" do
    def configured(*argv)
      config = JobQueue::Configuration.new
      config.queues = described_class.new(out: StringIO.new).parse(argv)[:queues]
      [config.queues, config.strict_order?]
    end

    it "orders strictly without weights, or with weight 0 alone" do
      expect(configured("-q", "a", "-q", "b")).to eq([[["a", 1], ["b", 1]], true])
      expect(configured("-q", "a,0", "-q", "b")).to eq([[["a", 1], ["b", 1]], true])
    end

    it "draws a weighted order once any queue has a weight, equal ones included" do
      expect(configured("-q", "a,1", "-q", "b,1")).to eq([[["a", 1], ["b", 1]], false])
      expect(configured("-q", "a,3", "-q", "b")).to eq([[["a", 3], ["b", 1]], false])
      expect(configured("-q", "a,0", "-q", "b,2")).to eq([[["a", 1], ["b", 2]], false])
    end

    it "reads [name, weight] and \"name,weight\" entries of a YAML file alike" do
      Dir.mktmpdir("queue-cli-weights") do |dir|
        file = File.join(dir, "queue.yml")
        File.write(file, ":queues:\n  - [a, 1]\n  - \"b,1\"\n  - c\n")
        expect(configured("-C", file)).to eq([[["a", 1], ["b", 1], ["c", 1]], false])
        File.write(file, ":queues:\n  - [a, 0]\n  - b\n")
        expect(configured("-C", file)).to eq([[["a", 1], ["b", 1]], true])
        File.write(file, ":queues:\n  - critical, 2\n  - default\n")
        expect(configured("-C", file)).to eq([[["critical", 2], ["default", 1]], false])
      end
    end
  end
end
