# frozen_string_literal: true

# Shared by the specs in spec/reliability: starts server processes and stops every one of them after
# its example (printing their logs when the example failed), and reads what the engine holds in Redis.
module ReliabilityHelpers
  def redis
    TestRedis.client
  end

  def servers
    @servers ||= []
  end

  # Starts `exe/queue -r spec/apps/<app> <args>`; the process is stopped after the example.
  def start_server(app, *args, env: {})
    server = ServerProcess.new(app: app, args: args, env: env).start
    servers << server
    server
  end

  # The identity (hostname:pid:hex) a server registers under. It registers before it takes any job.
  def identity_of(server, timeout: 30)
    wait_until("server #{server.pid} to register in `processes`", timeout: timeout) do
      redis.smembers("processes").find { |identity| identity.split(":")[-2] == server.pid.to_s }
    end
  end

  # The working lists (`jq:working:<identity>:<slot>:<queue>`) of one process, or of every process.
  def working_lists(identity = nil)
    pattern = identity ? "jq:working:#{identity}:*" : "jq:working:*"
    redis.scan_each(match: pattern, type: "list").to_a
  end

  # Counts, in one atomic step, the jobs in the given lists plus those in the working lists matching
  # `pattern`: a job moving from one list to another (recovery, then a fetch) is counted exactly once.
  COUNT_JOBS = <<~LUA
    local total = 0
    for _, key in ipairs(KEYS) do
      total = total + redis.call('LLEN', key)
    end
    for _, key in ipairs(redis.call('KEYS', ARGV[1])) do
      if redis.call('TYPE', key).ok == 'list' then
        total = total + redis.call('LLEN', key)
      end
    end
    return total
  LUA

  # How many jobs the working lists of one process (or of all) hold: taken, not yet acknowledged.
  def held_jobs(identity = nil)
    redis.eval(COUNT_JOBS, keys: [], argv: [identity ? "jq:working:#{identity}:*" : "jq:working:*"])
  end

  # Jobs not yet done: waiting in `queue:<name>` or held by any process, dead or alive.
  def outstanding_jobs(queue = "default")
    redis.eval(COUNT_JOBS, keys: ["queue:#{queue}"], argv: ["jq:working:*"])
  end

  # Every job of a list (a queue, or the workers' `started`/`finished` records), parsed.
  def list_of(key)
    redis.lrange(key, 0, -1).map { |raw| JSON.parse(raw) }
  end

  # The nearest-rank percentile `pct` (0-100] of `values`: with 40 values, p99 is the largest.
  def percentile(values, pct)
    sorted = values.sort
    sorted[[(sorted.size * pct / 100.0).ceil - 1, 0].max]
  end

  def report(line)
    RSpec.configuration.reporter.message(line)
  end

  def monotonic
    Process.clock_gettime(Process::CLOCK_MONOTONIC)
  end
end

RSpec.shared_context "with server processes" do
  include ReliabilityHelpers

  after do |example|
    if example.exception
      servers.each { |server| warn("--- log of server #{server.pid} (#{server.log}):\n#{server.output}") }
    end
    servers.each(&:ensure_stopped)
  end
end
