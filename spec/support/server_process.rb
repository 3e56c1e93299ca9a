# frozen_string_literal: true

require "tmpdir"

# A real server process under test: `exe/queue` (ours) or `sidekiq` (the real Sidekiq 6.4.1), run
# against the test Redis with an app file from spec/apps, or Debian's `puma` serving the config.ru of
# an app directory of spec/apps (args such as `-C puma.rb -b tcp://…`). Its output goes to a log file
# that a failing example prints.
class ServerProcess
  ROOT = File.expand_path("../..", __dir__)
  APPS = File.join(ROOT, "spec", "apps")

  attr_reader :pid, :log

  # kind: :queue, :cluster (`queue cluster`, args ending with its groups), :sidekiq or :puma. app: file (directory for :puma) name under spec/apps. args:
  # extra CLI flags.
  def initialize(kind: :queue, app:, args: [], env: {})
    @kind = kind
    @app = File.join(APPS, app)
    @args = args
    @env = {"REDIS_URL" => TestRedis.url, "QUEUE_TEST_DIR" => TestRedis.dir}.merge(env)
    @log = File.join(TestRedis.dir, "#{kind}-#{Process.clock_gettime(Process::CLOCK_MONOTONIC, :nanosecond)}.log")
  end

  def start
    command =
      case @kind
      when :queue then [RbConfig.ruby, File.join(ROOT, "exe", "queue"), "-r", @app, *@args]
      when :cluster then [RbConfig.ruby, File.join(ROOT, "exe", "queue"), "cluster", "-r", @app, *@args]
      when :sidekiq then [RbConfig.ruby, "-S", "sidekiq", "-r", @app, *@args]
      when :puma then [RbConfig.ruby, "-I", File.join(ROOT, "lib"), Gem.bin_path("puma", "puma"), *@args, File.join(@app, "config.ru")]
      end
    @pid = Process.spawn(@env, *command, chdir: ROOT, out: @log, err: [:child, :out], pgroup: true)
    self
  end

  def running?
    return false unless @pid

    Process.waitpid(@pid, Process::WNOHANG).nil?
  rescue Errno::ECHILD
    false
  end

  # Sends a signal and waits for the process to exit; returns its exit status.
  def stop(signal = "TERM", timeout: 60)
    Process.kill(signal, @pid)
    wait(timeout: timeout)
  end

  # The crash case: SIGKILL, no cleanup.
  def kill!
    Process.kill("KILL", @pid)
    wait(timeout: 10)
  end

  def signal(name)
    Process.kill(name, @pid)
  end

  def wait(timeout: 60)
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + timeout
    loop do
      _, status = Process.waitpid2(@pid, Process::WNOHANG)
      return status if status
      raise "server #{@pid} did not exit within #{timeout}s:\n#{output}" if Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline

      sleep 0.02
    end
  end

  def output
    File.exist?(@log) ? File.read(@log) : ""
  end

  # Ensures no process outlives its example (for Puma and a cluster, their workers or children too:
  # they share its group).
  def ensure_stopped
    kill_group if @kind == :puma || @kind == :cluster
    return unless running?

    Process.kill("KILL", @pid)
    Process.wait(@pid)
  rescue Errno::ESRCH, Errno::ECHILD
    nil
  end

  private

  def kill_group
    Process.kill("KILL", -@pid) if @pid
  rescue Errno::ESRCH, Errno::EPERM
    nil
  end
end
