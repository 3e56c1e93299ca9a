# frozen_string_literal: true

require_relative "shim_helper"

# README "Moving from Sidekiq": an app written against Sidekiq 6.4 that dropped the sidekiq gem runs
# unchanged with `require "queue/compat/sidekiq"` (spec/apps/sidekiq_shim_app.rb): a plain ruby
# process enqueues, our server runs the jobs.
RSpec.describe "queue/compat/sidekiq: a Sidekiq 6.4 app without the sidekiq gem", :shim do
  let(:redis) { TestRedis.client }

  def records(list) = redis.lrange(list, 0, -1).map { |r| JSON.parse(r) }

  it "enqueues through its client middleware and runs on our server with its server middleware, startup hook, options and retries" do
    jids = run_ruby(<<~RUBY, requires: [app_path("sidekiq_shim_app.rb")]).split
      puts ShimHardWorker.perform_async("one", 1)
      puts ShimHardWorker.perform_async("fail", 0)
      puts ShimJob.perform_async("set by ShimJob")
      puts Sidekiq::Client.push("class" => "ShimHardWorker", "args" => ["two", 2])
      raise "configure_server ran in a client" if Sidekiq.server? || defined?(Sidekiq::CLI)
    RUBY
    expect(jids.size).to eq(4)
    shim, default = %w[shim default].map { |q| redis.lrange("queue:#{q}", 0, -1).map { |j| JSON.parse(j) } }
    expect(shim.map { |j| j["retry"] }).to eq([1, 1]) # sidekiq_options; a push naming the class as a String gets the defaults, as in Sidekiq
    expect((shim + default).map { |j| j["stamped_by"] }).to eq(["client middleware in shim"] * 2 + ["client middleware in default"] * 2)

    server = ServerProcess.new(app: "sidekiq_shim_app.rb", args: ["-q", "shim", "-q", "default"]).start
    ran = wait_until("both ShimHardWorker jobs to run") { (r = records("shim:ran")).size >= 2 && r }
    expect(ran.map { |r| [r["jid"], r["args"]] }).to contain_exactly([jids[0], ["one", 1]], [jids[3], ["two", 2]])
    expect(ran.map { |r| r["logger"] }.uniq).to eq(["Logger"])
    expect(wait_until("ShimJob to run") { redis.get("shim:job") }).to eq("set by ShimJob")
    failed = wait_until("the failure in the retry set") { redis.zrange("retry", 0, -1).map { |j| JSON.parse(j) }.first }
    expect(failed).to include("jid" => jids[1], "retry" => 1, "retry_count" => 0, "error_class" => "ArgumentError", "queue" => "shim")
    expect(records("shim:events")).to eq([{"event" => "startup", "server" => true}])
    expect(records("shim:errors").map { |e| e["error"] }).to include("failing as asked")
    middleware = wait_until("server middleware for every job") { (m = records("shim:middleware")).size >= 4 && m }
    expect(middleware.map { |m| m["jid"] }).to match_array(jids)
    expect(middleware.map { |m| m["label"] }.uniq).to eq(["server"])
    expect(server.stop.exitstatus).to eq(0)
    expect(server.output).to include("3 threads") # config.options[:concurrency] = 3
  ensure
    server&.ensure_stopped
  end

  it "runs the app's own Sidekiq::Testing specs (fake and inline modes) in a subprocess rspec" do
    out, status = Open3.capture2e({"REDIS_URL" => TestRedis.url}, RbConfig.ruby, "-S", "rspec", "--no-color", "-I", ShimHelpers::LIB,
      "-O", "/dev/null", app_path("sidekiq_shim_testing.rb"), chdir: ServerProcess::ROOT)
    expect(status).to be_success, out
    expect(out).to match(/\b7 examples, 0 failures/)
    expect(redis.keys("*")).to eq([]) # fake and inline modes write nothing to Redis
  end
end
