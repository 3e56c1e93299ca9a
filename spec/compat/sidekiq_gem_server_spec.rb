# frozen_string_literal: true

require_relative "compat_helper"

# Issue #24, point 2 (README "Moving from Sidekiq"): an app that keeps the sidekiq gem and runs
# `queue` gets its Sidekiq.configure_server blocks run, as `sidekiq` runs them: their Redis, server
# middleware, error and death handlers and lifecycle hooks all take effect. What only Sidekiq's own
# server would read stops the start, naming it and what to use instead.
RSpec.describe "Sidekiq.configure_server of an app keeping the sidekiq gem, on queue", :compat do
  def seen
    redis.lrange(GemServerRecord::KEY, 0, -1).map { |r| JSON.parse(r) }
  end

  before { require_relative "../apps/sidekiq_gem_server" } # GemServerRecord::KEY; the block does not run here

  it "honours the block: its Redis, middleware, handlers and hooks" do
    # REDIS_URL leads nowhere: only the block's config.redis reaches the suite's Redis.
    env = {"REDIS_URL" => "redis://127.0.0.1:#{free_port}/0", "SIDEKIQ_APP_REDIS_URL" => TestRedis.url}
    server = ServerProcess.new(app: "sidekiq_gem_server.rb", args: ["-c", "3", "-q", "gem_server"], env: env).start
    @servers << server
    ok = Sidekiq::Client.push("class" => "GemServerWorker", "queue" => "gem_server", "args" => ["ok"])
    failing = Sidekiq::Client.push("class" => "GemServerWorker", "queue" => "gem_server", "args" => ["fail"], "retry" => 0)

    wait_until("the failing job's death handler") { seen.any? { |r| r["death_handler"] } }
    wait_until("the job to run") { seen.any? { |r| r["ran"] == ok } }
    expect(server.stop.exitstatus).to eq(0)

    records = seen
    expect(records.first).to eq("event" => "startup", "concurrency" => 3)
    expect(records.last).to eq("event" => "shutdown")
    expect(records.select { |r| r["jid"] == ok && r["middleware"] }).to eq([
      {"middleware" => "first", "class" => "GemServerWorker", "jid" => ok, "queue" => "gem_server"},
      {"middleware" => "second", "class" => "GemServerWorker", "jid" => ok, "queue" => "gem_server"}
    ])
    expect(records).to include({"ran" => ok, "server" => true},
      {"error_handler" => "failing as asked", "jid" => failing}, {"death_handler" => "failing as asked", "jid" => failing})
    expect(server.output).to include("sidekiq 6.4.1 gem: Sidekiq.configure_server honoured: server middleware " \
      "GemServerMiddleware, GemServerInnerMiddleware; 1 error handler(s), 1 death handler(s), 2 lifecycle hook(s)")
  end

  {
    "concurrency" => "queue: Sidekiq.configure_server sets Sidekiq.options[:concurrency] = 5, which only Sidekiq's server " \
      "reads; `queue` does not. Remove it from the block and use: -c N, or :concurrency: in config/queue.yml\n",
    "pool" => "queue: Sidekiq.redis = ConnectionPool: queue's engine dials Redis itself and cannot use a connection pool; " \
      "give the settings Hash instead (config.redis = {url: ..., size: ...})\n",
    "driver" => "queue: Sidekiq.redis = {...} (in Sidekiq.configure_server) is queue's Redis too: unknown redis option(s) " \
      "driver; use #{JobQueue::RedisOptions::KEYS.map { |k| "#{k}:" }.join(", ")}\n"
  }.each do |refused, message|
    it "refuses to start when the block sets what queue cannot honour (#{refused}), naming it and what to use" do
      server = ServerProcess.new(app: "sidekiq_gem_refused.rb", env: {"REFUSED" => refused}).start
      @servers << server
      expect(server.wait(timeout: 30).exitstatus).to eq(1)
      # (A line before it may be the gem's own, from its Sidekiq.redis pool: "Booting Sidekiq 6.4.1 with redis options".)
      expect(server.output.lines.last).to eq(message)
    end
  end
end
