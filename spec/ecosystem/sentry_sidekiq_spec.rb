# frozen_string_literal: true

require_relative "../compat/shim_helper"
require "securerandom"

# sentry-sidekiq 5.3 (the Debian gem) in an app run by our server (spec/apps/sentry_sidekiq_app.rb):
# its Sidekiq.configure_server block adds an error handler and a server middleware, and its client
# middleware carries the pushing code's Sentry user in the job. Sentry's DummyTransport keeps the
# events in the server process; the app writes them to Redis. Nothing is sent anywhere.
RSpec.describe "sentry-sidekiq under our server", :shim do
  let(:redis) { TestRedis.client }

  def events = redis.lrange("sentry:events", 0, -1).map { |e| JSON.parse(e) }

  def errors = events.reject { |e| e["type"] == "transaction" }

  def transactions = events.select { |e| e["type"] == "transaction" }

  def push_from_app(env)
    out = run_ruby(<<~RUBY, requires: [app_path("sentry_sidekiq_app.rb")], env: env)
      Sentry.set_user(id: 42, username: "ana")
      puts "jid " + SentryFailingWorker.perform_async("A-17", 9.5, {"gift" => true})
      puts "jid " + SentryOkWorker.perform_async("fine")
    RUBY
    out.scan(/^jid (\h+)$/).flatten
  end

  shared_examples "reports a job's error with the job's context" do |env|
    it "captures the failing job's exception with its class, jid, queue, args and the pushing user, and a transaction per job" do
      failing_jid, ok_jid = push_from_app(env)
      server = ServerProcess.new(app: "sentry_sidekiq_app.rb", args: ["-q", "sentry"], env: env).start
      event = wait_until("Sentry's error event") { errors.first }
      expect(event["exception"]["values"].map { |v| [v["type"], v["value"]] })
        .to eq([["ArgumentError", "order A-17 failed for 9.5 with {\"gift\"=>true}"]])
      sidekiq = event["contexts"]["sidekiq"]
      expect(sidekiq).to include("class" => "SentryFailingWorker", "jid" => failing_jid, "queue" => "sentry",
        "args" => ["A-17", 9.5, {"gift" => true}], "retry" => 2, "context" => "Job raised exception")
      expect(event["transaction"]).to eq("Sidekiq/SentryFailingWorker")
      expect(event["tags"]).to include("queue" => "sentry", "jid" => failing_jid)
      expect(event["user"]).to eq("id" => 42, "username" => "ana") # through the job's "sentry_user" (client middleware)
      expect(event["extra"]).to include("order" => "A-17") # the job's own scope: the middleware's and the handler's thread
      expect(wait_until("the ok job") { redis.lrange("sentry:ok", 0, -1).first }).to eq("fine")
      expect(wait_until("the failure in the retry set") { redis.zcard("retry") == 1 }).to be(true)

      expect(server.stop.exitstatus).to eq(0)
      expect(errors.size).to eq(1)
      expect(transactions.map { |t| [t["transaction"], t["contexts"]["trace"]["op"], t["contexts"]["trace"]["status"]] })
        .to contain_exactly(["Sidekiq/SentryFailingWorker", "sidekiq", "internal_error"], ["Sidekiq/SentryOkWorker", "sidekiq", "ok"])
      expect(transactions.map { |t| t["tags"]["jid"] }).to contain_exactly(failing_jid, ok_jid)
      expect(server.output).not_to match(/error handler .* raised/)
    ensure
      server&.ensure_stopped
    end

    it "with report_after_job_retries, reports only a job's last attempt (the error handlers see the job as it ran)" do
      # Jobs as the retry set hands them back (retry_count of the attempt before), pushed as raw JSON.
      now = Time.now.to_f
      attempts = {first: [2, nil], second: [2, 0], last: [2, 1], default_second_to_last: [true, 23], default_last: [true, 24]}
      jids = attempts.to_h do |name, (retry_option, count)|
        job = {"class" => "SentryFailingWorker", "args" => ["A-17", 1, {}], "queue" => "sentry", "jid" => SecureRandom.hex(12),
               "retry" => retry_option, "created_at" => now, "enqueued_at" => now}
        job["retry_count"] = count if count
        redis.lpush("queue:sentry", JSON.generate(job))
        [name, job["jid"]]
      end
      server = ServerProcess.new(app: "sentry_sidekiq_app.rb", args: ["-q", "sentry"],
        env: env.merge("SENTRY_REPORT_AFTER_JOB_RETRIES" => "1")).start
      wait_until("all five attempts filed") { redis.zcard("retry") == 3 && redis.zcard("dead") == 2 }
      expect(server.stop.exitstatus).to eq(0) # the error handlers have run: they run before a job is done

      expect(errors.map { |e| e["tags"]["jid"] }).to contain_exactly(jids[:last], jids[:default_last])
      expect(errors.map { |e| e["contexts"]["sidekiq"]["retry_count"] }).to contain_exactly(1, 24)
      expect(server.output).not_to match(/error handler .* raised/) # Sidekiq.options[:max_retries], read for retry: true
    ensure
      server&.ensure_stopped
    end
  end

  context "with the compat shim (no sidekiq gem)" do
    include_examples "reports a job's error with the job's context", {}
  end

  context "keeping the real sidekiq 6.4.1 gem" do
    include_examples "reports a job's error with the job's context", {"SENTRY_APP_KEEPS_SIDEKIQ_GEM" => "1"}
  end
end
