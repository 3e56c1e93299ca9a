# frozen_string_literal: true

require "json"
require "tmpdir"

# Ordered workers are listed from what the app defines, not from whichever of its classes autoloading
# happened to load: spec/rails_app in development (nothing eager-loaded), 5 ids queued for its
# OrderedWorker and one in its morgue. `queue ordered -r ./config/environment.rb`, JobQueue::Ordered
# in `bin/rails runner` and the dashboard in the app's process all see them; an app without ordered
# workers is told so, not told to load itself.
RSpec.describe "Ordered workers of a Rails app in development" do
  RSpec::Matchers.define_negated_matcher :not_include, :include

  # The dashboard as a Rails app's process serves it (mounted in config/routes.rb): each path's status
  # and body, one JSON line each.
  let(:dashboard_script) do
    <<~'RUBY'
      require "queue/web"
      require "rack/mock"
      web = Rack::MockRequest.new(JobQueue::Web)
      ARGV.each { |path| response = web.get(path); puts JSON.generate([path, response.status, response.body]) }
    RUBY
  end

  let(:development) { {"RAILS_ENV" => "development"} }
  let(:redis) { TestRedis.client }

  before do
    output, status = RailsApp.run(RbConfig.ruby, "bin/rails", "runner",
      "OrderedWorker.perform_async((1..5).map { |n| {id: n, payload: {'n' => n}} })", env: development)
    expect(status).to be_success, output
    # A morgue entry in Lowkiq's layout.
    prefix = "lowkiq:A:v1:OrderedWorker:morgue:"
    redis.zadd("#{prefix}all_ids_lex", 0, "doomed")
    redis.zadd("#{prefix}all_ids_scored_by_updated_at", 1_700_000_000, "doomed")
    redis.zadd("#{prefix}payloads:doomed", 1, JSON.generate("n" => 0))
    redis.hset("#{prefix}errors", "doomed", "RuntimeError: boom")
  end

  def queue(*args, env: {"RAILS_ENV" => nil})
    RailsApp.run("bundle", "exec", RbConfig.ruby, File.join(ServerProcess::ROOT, "exe", "queue"), *args, env: env)
  end

  def dashboard(*paths, dir: RailsApp::DIR)
    Dir.mktmpdir("queue-dashboard-") do |tmp|
      script = File.join(tmp, "dashboard.rb")
      File.write(script, dashboard_script)
      output, status = RailsApp.run(RbConfig.ruby, "bin/rails", "runner", script, *paths, env: development, dir: dir)
      expect(status).to be_success, output
      output.lines.grep(/\A\[/).to_h { |line| JSON.parse(line).then { |path, code, body| [path, [code, body]] } }
    end
  end

  it "are in `queue ordered stats` and `queue ordered morgue` with config/environment.rb required" do
    output, status = queue("ordered", "stats", "-r", "./config/environment.rb")
    expect(status).to be_success, output
    stats = JSON.parse(output[/^\{.*/m])
    expect(stats["by_worker"]).to eq("OrderedWorker" => {"length" => 5, "morgue_length" => 1, "lag" => stats["total"]["lag"]})
    expect(stats["total"]).to include("length" => 5, "morgue_length" => 1)

    output, status = queue("ordered", "morgue", "OrderedWorker", "-r", "./config/environment.rb")
    expect(status).to be_success, output
    expect(output).to include('"id":"doomed"', "RuntimeError: boom")
  end

  it "are in JobQueue::Ordered in bin/rails runner, before any of them is used and after a code reload" do
    script = <<~'RUBY'
      counts = -> { JobQueue::Ordered.stats["by_worker"].transform_values { |w| w.slice("length", "morgue_length") } }
      before = counts.call
      Rails.application.reloader.reload!
      puts JSON.generate([before, counts.call, JobQueue::Ordered.workers == [::OrderedWorker]])
    RUBY
    output, status = RailsApp.run(RbConfig.ruby, "bin/rails", "runner", script, env: development)
    expect(status).to be_success, output
    counts = {"OrderedWorker" => {"length" => 5, "morgue_length" => 1}}
    expect(JSON.parse(output.lines.last)).to eq([counts, counts, true]) # the reloaded module, not the old one too
  end

  it "are on the dashboard served by the app's process" do
    pages = dashboard("/ordered", "/ordered/OrderedWorker", "/api/v1/ordered", "/api/v1/ordered/OrderedWorker/morgue")

    status, body = pages.fetch("/ordered")
    expect(status).to eq(200)
    expect(body).to include(%(href="/ordered/OrderedWorker")).and not_include("No ordered worker")
    status, body = pages.fetch("/ordered/OrderedWorker")
    expect([status, body]).to match([200, a_string_including("doomed", "RuntimeError: boom")])
    status, body = pages.fetch("/api/v1/ordered")
    expect(status).to eq(200)
    expect(JSON.parse(body)["queues"].map { |q| q.slice("name", "length", "morgue_length") })
      .to eq([{"name" => "OrderedWorker", "length" => 5, "morgue_length" => 1}])
    status, body = pages.fetch("/api/v1/ordered/OrderedWorker/morgue")
    expect(status).to eq(200)
    expect(JSON.parse(body)["entries"].map { |e| e["id"] }).to eq(["doomed"])
  end

  it "when the app has none, the dashboard says so instead of asking for the app to be loaded" do
    Dir.mktmpdir("queue-no-ordered-") do |dir|
      RailsApp.copy(dir)
      FileUtils.rm(File.join(dir, "app", "workers", "ordered_worker.rb"))
      status, body = dashboard("/ordered", dir: dir).fetch("/ordered")
      expect(status).to eq(200)
      expect(body).to include("defines no ordered worker").and not_include("queue web -r .")
    end
  end
end
