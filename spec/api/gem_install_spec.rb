# frozen_string_literal: true

require "tmpdir"
require "fileutils"

# Acceptance criterion 1: the gem builds from the working tree, installs with `gem install` (compiling
# the Rust extension with cargo), and works from the install alone: no -I lib, no checkout.
RSpec.describe "the queue gem, built and installed", :gem_install do
  shared_target = File.join(ServerProcess::ROOT, "target")

  around do |example|
    Dir.mktmpdir("queue-gem-install") do |dir|
      @dir = dir
      @gems = File.join(dir, "gems")
      example.run
    end
  end

  # Children see the install and the test Redis, and nothing of this process's load path or Bundler.
  def isolated_env
    {
      "GEM_HOME" => @gems, "GEM_PATH" => @gems, "REDIS_URL" => TestRedis.url,
      "RUBYOPT" => nil, "RUBYLIB" => nil, "BUNDLE_GEMFILE" => nil, "BUNDLER_SETUP" => nil, "BUNDLE_BIN_PATH" => nil
    }
  end

  # Runs a command to its exit, killing its process group if it outlives `timeout`; returns its output
  # and fails the example, with that output, if it did not succeed.
  def run!(env, *command, chdir:, timeout: 60)
    log = File.join(@dir, "command-#{Process.clock_gettime(Process::CLOCK_MONOTONIC, :nanosecond)}.log")
    pid = Process.spawn(env, *command, chdir: chdir, out: log, err: [:child, :out], pgroup: true)
    status = nil
    begin
      status = wait_until("#{command.join(" ")} to finish", timeout: timeout, interval: 0.1) { Process.wait2(pid, Process::WNOHANG)&.last }
    ensure
      unless status
        Process.kill("KILL", -pid)
        Process.wait(pid)
      end
    end
    output = File.read(log)
    expect(status).to be_success, "#{command.join(" ")} exited with #{status.exitstatus}:\n#{output}"
    output
  end

  # The working tree as a clean checkout would hold it, plus files not committed yet.
  def copy_working_tree(to)
    listed = IO.popen(%w[git ls-files -z --cached --others --exclude-standard], chdir: ServerProcess::ROOT, &:read).split("\0")
    expect(listed).to include("queue.gemspec", "ext/queue/extconf.rb", "exe/queue")
    listed.each do |path|
      source = File.join(ServerProcess::ROOT, path)
      next unless File.file?(source)

      FileUtils.mkdir_p(File.dirname(File.join(to, path)))
      FileUtils.cp(source, File.join(to, path), preserve: true)
    end
  end

  it "builds, installs, and runs a job with the installed queue executable" do
    source = File.join(@dir, "source")
    copy_working_tree(source)
    run!(isolated_env, "gem", "build", "queue.gemspec", chdir: source)
    gem_file = File.join(source, "queue-#{JobQueue::VERSION}.gem")
    expect(File).to exist(gem_file)

    # CARGO_TARGET_DIR reuses the dependencies this checkout already compiled; the install must leave
    # that shared directory in place.
    run!(isolated_env.merge("CARGO_TARGET_DIR" => shared_target),
      "gem", "install", "--local", "--install-dir", @gems, "--no-document", gem_file, chdir: @dir, timeout: 900)
    expect(File).to be_directory(File.join(shared_target, "release"))
    executable = File.join(@gems, "bin", "queue")
    expect(File).to be_executable(executable)

    app = File.join(@dir, "app.rb")
    File.write(app, <<~RUBY)
      require "queue"

      class GemInstallWorker
        include JobQueue::Worker

        def perform(path, text)
          File.write(path, "\#{text} \#{jid}")
        end
      end
    RUBY
    script = File.join(@dir, "enqueue.rb")
    File.write(script, <<~RUBY)
      require "queue"
      require "json"
      require ARGV[0]

      jid = GemInstallWorker.perform_async(ARGV[1], "ran")
      puts JSON.generate("jid" => jid, "loaded" => $LOADED_FEATURES.grep(%r{/queue(\\.rb|/queue\\.so)\\z}))
    RUBY
    marker = File.join(@dir, "ran.txt")

    report = JSON.parse(run!(isolated_env, RbConfig.ruby, script, app, marker, chdir: @dir).lines.last)
    expect(report["loaded"].size).to eq(2)
    expect(report["loaded"]).to all(start_with(@gems))
    expect(JSON.parse(TestRedis.client.lindex("queue:default", 0))).to include("jid" => report["jid"], "class" => "GemInstallWorker")

    log = File.join(@dir, "server.log")
    server = Process.spawn(isolated_env, executable, "-r", app, "-c", "1", chdir: @dir, out: log, err: [:child, :out])
    begin
      written = wait_until("the installed server to run the job") { File.size?(marker) && File.read(marker) }
      expect(written).to eq("ran #{report["jid"]}")
      Process.kill("TERM", server)
      _, status = wait_until("the installed server to stop") { Process.wait2(server, Process::WNOHANG) }
      server = nil
      expect(status.exitstatus).to eq(0), File.read(log)
      expect(File.read(log)).to include("queue #{JobQueue::VERSION} started")
    ensure
      if server
        Process.kill("KILL", server)
        Process.wait(server)
      end
    end
  end
end
