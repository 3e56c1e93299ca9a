# frozen_string_literal: true

require "open3"
require "queue/api"

# ActiveJob across the two servers: Rails' own Sidekiq adapter enqueues and our server performs; our
# :queue adapter enqueues and a real Sidekiq 6.4.1 process performs. Both write the same job form.
RSpec.describe "ActiveJob interop with Sidekiq 6.4.1" do
  let(:app) { File.join(ServerProcess::APPS, "active_job_interop.rb") }
  let(:wire_keys) { %w[args class created_at enqueued_at jid queue retry wrapped] }

  before { @servers = [] }

  after do |example|
    @servers.each do |server|
      warn("\n--- #{server.log}\n#{server.output}") if example.exception
      server.ensure_stopped
    end
  end

  def enqueue(adapter, code)
    env = {"ACTIVE_JOB_ADAPTER" => adapter, "REDIS_URL" => TestRedis.url, "RUBYOPT" => nil, "BUNDLE_GEMFILE" => nil}
    output, status = Open3.capture2e(env, RbConfig.ruby, "-r", app, "-e", code)
    expect(status).to be_success, output
  end

  def runs
    TestRedis.client.lrange("interop:ran", 0, -1).map { |r| JSON.parse(r) }
  end

  # The oldest job in the queue (Redis lists are pushed on the left).
  def queued_job
    JSON.parse(TestRedis.client.lindex("queue:interop", -1))
  end

  def expect_wire_form(job)
    expect(job.keys.sort).to eq(wire_keys)
    expect(job).to include("class" => "ActiveJob::QueueAdapters::SidekiqAdapter::JobWrapper", "wrapped" => "InteropJob", "queue" => "interop", "retry" => true)
    expect(job["args"].first).to include("job_class" => "InteropJob", "queue_name" => "interop", "arguments" => ["now", 1, {"k" => "v", "_aj_symbol_keys" => []}])
  end

  def start(kind, adapter)
    @servers << ServerProcess.new(kind: kind, app: "active_job_interop.rb", args: ["-q", "interop", "-c", "2"],
      env: {"ACTIVE_JOB_ADAPTER" => adapter}).start
  end

  it "runs on our server what Sidekiq's adapter enqueued, and retry_on enqueues through ours" do
    enqueue("sidekiq", <<~RUBY)
      InteropJob.perform_later("now", 1, {"k" => "v"})
      InteropJob.set(wait: 1).perform_later("later", 2)
      InteropFlakyJob.perform_later("flaky")
    RUBY
    expect_wire_form(queued_job)
    start(:queue, "queue")
    wait_until("4 runs") { runs.size >= 4 }
    expect(runs.map { |r| [r["runner"], r["wrapper"], r["args"], r["executions"]] }).to contain_exactly(
      ["queue", "ours", ["now", 1, {"k" => "v"}], 1], ["queue", "ours", ["later", 2], 1],
      ["queue", "ours", ["flaky"], 1], ["queue", "ours", ["flaky"], 2]
    )
    expect(runs).to all(include("provider_job_id" => a_string_matching(/\A\h{24}\z/)))
    expect(JobQueue.stats).to include("failed" => 0, "retry_size" => 0)
  end

  it "runs in a real sidekiq process what our adapter enqueued" do
    enqueue("queue", <<~RUBY)
      InteropJob.perform_later("now", 1, {"k" => "v"})
      InteropJob.set(wait: 1).perform_later("later", 2)
      InteropFlakyJob.perform_later("flaky")
    RUBY
    expect_wire_form(queued_job)
    start(:sidekiq, "sidekiq")
    wait_until("4 runs") { runs.size >= 4 }
    expect(runs.map { |r| [r["runner"], r["wrapper"], r["args"], r["executions"]] }).to contain_exactly(
      ["sidekiq", "rails", ["now", 1, {"k" => "v"}], 1], ["sidekiq", "rails", ["later", 2], 1],
      ["sidekiq", "rails", ["flaky"], 1], ["sidekiq", "rails", ["flaky"], 2]
    )
    expect(runs).to all(include("provider_job_id" => a_string_matching(/\A\h{24}\z/)))
  end

  it "runs Rails' own JobWrapper on our server when the app has the sidekiq gem loaded" do
    enqueue("queue", 'InteropJob.perform_later("now", 1, {"k" => "v"}); InteropFlakyJob.perform_later("flaky")')
    start(:queue, "sidekiq") # the app loads sidekiq and keeps queue_adapter = :sidekiq
    wait_until("3 runs") { runs.size >= 3 }
    expect(runs.map { |r| [r["runner"], r["wrapper"], r["args"], r["executions"]] }).to contain_exactly(
      ["queue", "rails", ["now", 1, {"k" => "v"}], 1], ["queue", "rails", ["flaky"], 1], ["queue", "rails", ["flaky"], 2]
    )
    expect(JobQueue.stats).to include("failed" => 0, "retry_size" => 0)
  end

  # Sidekiq 8's adapter pushes class Sidekiq::ActiveJob::Wrapper (spec/fixtures/sidekiq8); our server
  # runs it as Rails' Sidekiq JobWrapper, and shows and logs the ActiveJob class.
  it "runs a job Sidekiq 8's adapter pushed, logged and shown under its ActiveJob class" do
    fixture = File.read(File.expand_path("../fixtures/sidekiq8/active_job_8_0.json", __dir__))
    enqueue("queue", <<~RUBY)
      job = JSON.parse(#{fixture.strip.inspect})
      job["args"] = [InteropJob.new("v8", 8).serialize]
      JobQueue.config.engine.push("interop", [JSON.generate(job)])
    RUBY
    record = JobQueue::Queue.new("interop").first
    expect(record).to have_attributes(klass: "Sidekiq::ActiveJob::Wrapper", display_class: "InteropJob", display_args: ["v8", 8])

    server = start(:queue, "queue").last
    wait_until("the run") { runs.size >= 1 }
    expect(runs.map { |r| [r["runner"], r["wrapper"], r["args"], r["provider_job_id"]] })
      .to eq([["queue", "ours", ["v8", 8], "5a1e2b3c4d5e6f708192a3b4"]])
    wait_until("the job's done line") { server.output.include?("class=InteropJob jid=5a1e2b3c4d5e6f708192a3b4") }
    expect(server.output).not_to include("class=Sidekiq::ActiveJob::Wrapper")
    expect(JobQueue.stats).to include("failed" => 0, "processed" => 1)
  end
end
