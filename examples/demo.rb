# frozen_string_literal: true

# The demo behind bin/demo: enqueue a workload, run `queue` on it, and show progress until every job
# ran, including one that fails and is retried and one scheduled for later. Uses REDIS_URL if set;
# otherwise starts a private redis-server on a unix socket in a temp dir and stops it at the end.
$LOAD_PATH.unshift(File.expand_path("../lib", __dir__))
require "tmpdir"
require "fileutils"
require "queue"
require "queue/testing/redis_server"
require_relative "demo_workers"

class Demo
  ROOT = File.expand_path("..", __dir__)
  NAMESPACE = "queue-demo"
  GIVE_UP_AFTER = 120

  def initialize(jobs:)
    @jobs = jobs
    @dir = Dir.mktmpdir("queue-demo")
    ENV["DEMO_DIR"] = @dir
  end

  def run
    @url = ENV["REDIS_URL"].to_s.empty? ? start_redis : ENV["REDIS_URL"]
    JobQueue.configure { |c| c.redis = {url: @url, namespace: NAMESPACE} }
    @before = JobQueue.stats
    enqueue
    start_server
    watch
    stop_server
    summary
  ensure
    stop_server
    stop_redis
    FileUtils.rm_rf(@dir)
  end

  private

  def start_redis
    @redis = JobQueue::Testing::RedisServer.new(prefix: "queue-demo-redis").start
    puts "==> started an embedded redis-server on #{@redis.socket} (REDIS_URL is not set)"
    @redis.url
  end

  def stop_redis
    @redis&.stop
    @redis = nil
  end

  def enqueue
    puts "==> enqueueing #{@jobs} blank jobs, one job that fails once, and one scheduled 3 s ahead"
    t0 = Time.now
    DemoWorker.perform_bulk((1..@jobs).map { |n| [n] })
    FlakyWorker.perform_async("flaky")
    ReminderWorker.perform_in(3, "scheduled job ran")
    puts format("    enqueued in %.2fs", Time.now - t0)
  end

  def start_server
    @log = File.join(@dir, "server.log")
    env = {"REDIS_URL" => @url, "DEMO_DIR" => @dir}
    @server = Process.spawn(env, RbConfig.ruby, File.join(ROOT, "exe", "queue"),
      "-r", File.join(__dir__, "demo_server.rb"), "-c", "10", out: @log, err: [:child, :out])
    puts "==> started `queue -c 10` (pid #{@server})"
  end

  def stop_server
    return unless @server

    Process.kill("TERM", @server)
    Process.wait(@server)
    @server = nil
  rescue Errno::ESRCH, Errno::ECHILD
    @server = nil
  end

  def watch
    @started = Time.now
    loop do
      stats = delta
      @first_run_at ||= Time.now if stats[:run].positive?
      @bulk_done_at ||= Time.now if stats[:run] >= @jobs
      render(stats)
      break if finished?(stats)
      raise "the server exited early:\n#{File.read(@log)}" if Process.waitpid(@server, Process::WNOHANG)
      break puts("\n    giving up after #{GIVE_UP_AFTER} s") if Time.now - @started > GIVE_UP_AFTER

      sleep 0.05
    end
    @elapsed = (@bulk_done_at || Time.now) - (@first_run_at || @started)
    puts
  end

  def delta
    s = JobQueue.stats
    {run: s["processed"] - @before["processed"], failed: s["failed"] - @before["failed"],
     queued: s["enqueued"], retry: s["retry_size"], scheduled: s["scheduled_size"], dead: s["dead_size"]}
  end

  def finished?(stats)
    stats[:run] >= @jobs + 2 + stats[:failed] && marker?("flaky.done") && marker?("reminder")
  end

  def render(stats)
    total = @jobs + 3 # the flaky job runs twice
    filled = 30 * [stats[:run], total].min / total
    print format("\r    [%-30s] %6d/%d runs  queued %-6d retry %d  scheduled %d  failed %d  %5.1fs ",
      "#" * filled, stats[:run], total, stats[:queued], stats[:retry], stats[:scheduled], stats[:failed],
      Time.now - @started)
  end

  def summary
    stats = delta
    puts "==> summary"
    rate = @elapsed >= 0.05 ? format("%d jobs/s", @jobs / @elapsed) : "too fast to time at this size"
    puts format("    blank jobs:       %d run in %.2fs, %s (first to last run, polled every 0.05 s)", @jobs, @elapsed, rate)
    puts "    failing job:      #{marker?("flaky.done") ? "failed once, retried, then succeeded" : "DID NOT SUCCEED"}"
    puts "    scheduled job:    #{marker?("reminder") ? "ran when due" : "DID NOT RUN"}"
    puts "    processed/failed: #{stats[:run]} / #{stats[:failed]} (a failure counts as processed, as in Sidekiq)"
    puts "    left over:        #{stats[:queued]} queued, #{stats[:retry]} retrying, #{stats[:dead]} dead"
  end

  def marker?(name)
    File.exist?(File.join(@dir, name))
  end
end

Demo.new(jobs: Integer(ENV.fetch("DEMO_JOBS", "50000"))).run
