# frozen_string_literal: true

require "fileutils"
require "open3"

# The Rails 6.1 app in spec/rails_app, run as its own processes (its own bundle, Debian's gems)
# against the suite's redis-server, with its SQLite database in the suite's temp dir. `dir:` runs a
# copy of it instead (spec/rails/generators_spec.rb).
module RailsApp
  DIR = File.expand_path("../rails_app", __dir__)

  module_function

  def env(extra = {}, dir: DIR)
    {
      # Redis only through config/queue.yml (QUEUE_REDIS_URL): REDIS_URL leads nowhere.
      "QUEUE_REDIS_URL" => TestRedis.url, "REDIS_URL" => "redis://127.0.0.1:1/0", "DATABASE_PATH" => database,
      "RAILS_LOG_PATH" => File.join(TestRedis.dir, "rails_app.log"), "RAILS_ENV" => "test",
      "BUNDLE_GEMFILE" => File.join(dir, "Gemfile"), "RUBYOPT" => nil, "RUBYLIB" => nil
    }.merge(extra)
  end

  def database
    File.join(TestRedis.dir, "rails_app.sqlite3")
  end

  # Runs a command in the app to completion; returns [output, status].
  def run(*command, env: {}, dir: DIR)
    Open3.capture2e(self.env(env, dir: dir), *command, chdir: dir)
  end

  # A copy of the app in `dir` (its Gemfile pointing at this checkout), without its Gemfile.lock, logs
  # and databases; returns dir.
  def copy(dir)
    FileUtils.cp_r(Dir.glob(File.join(DIR, "*"), File::FNM_DOTMATCH).reject { |f| %w[. ..].include?(File.basename(f)) }, dir)
    FileUtils.rm_rf(%w[Gemfile.lock log tmp].map { |f| File.join(dir, f) } + Dir.glob(File.join(dir, "db", "*.sqlite3")))
    gemfile = File.join(dir, "Gemfile")
    text = File.read(gemfile)
    raise "#{gemfile}: no `path: \"../..\"` to point at #{ServerProcess::ROOT}" unless text.include?('path: "../.."')

    File.write(gemfile, text.sub('path: "../.."', "path: #{ServerProcess::ROOT.inspect}"))
    dir
  end

  # `bundle exec queue` in the app, as a ServerProcess-like handle (exe/queue of this checkout).
  def server(*args, env: {}, dir: DIR)
    log = File.join(TestRedis.dir, "rails-queue-#{Process.clock_gettime(Process::CLOCK_MONOTONIC, :nanosecond)}.log")
    pid = Process.spawn(self.env(env, dir: dir), "bundle", "exec", RbConfig.ruby, File.join(ServerProcess::ROOT, "exe", "queue"), *args,
      chdir: dir, out: log, err: [:child, :out], pgroup: true)
    Server.new(pid, log)
  end

  # The rows the app's jobs wrote: [[kind, key, value, held_connection], ...] in insertion order.
  def entries
    require "sqlite3"
    return [] unless File.exist?(database)

    db = SQLite3::Database.new(database, readonly: true)
    db.busy_timeout = 5000
    db.execute("SELECT kind, key, value, held_connection FROM entries ORDER BY id")
  rescue SQLite3::SQLException # the table is not there yet
    []
  ensure
    db&.close
  end

  Server = Struct.new(:pid, :log) do
    def output
      File.exist?(log) ? File.read(log) : ""
    end

    def stop(timeout: 30)
      Process.kill("TERM", pid)
      deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + timeout
      loop do
        _, status = Process.waitpid2(pid, Process::WNOHANG)
        return status if status
        raise "queue #{pid} did not stop within #{timeout}s:\n#{output}" if Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline

        sleep 0.02
      end
    end

    # Yields this server; prints its log when an expectation inside fails, and always stops it.
    def watch
      yield self
    rescue RSpec::Expectations::ExpectationNotMetError
      warn("\n--- #{log}\n#{output}")
      raise
    ensure
      ensure_stopped
    end

    def ensure_stopped
      Process.kill("KILL", pid)
      Process.wait(pid)
    rescue Errno::ESRCH, Errno::ECHILD
      nil
    end
  end
end
