# frozen_string_literal: true

require_relative "shim_helper"

# README "Moving from Sidekiq": its HardWorker and push, as written, run on our server both ways the
# section gives: with the sidekiq gem kept, and with it dropped for the compat shim (the README's
# initializer line). The app is spec/apps/readme_sidekiq.rb; the client is a ruby process of its own.
RSpec.describe "README: Moving from Sidekiq", :shim do
  let(:redis) { TestRedis.client }
  # The server command the push's comment gives: `bundle exec queue -q critical`.
  let(:server_args) { Readme.blocks("## Moving from Sidekiq", count: 4)[1].code[/`bundle exec queue ([^`]+)`/, 1].split }

  def push(sidekiq)
    run_ruby("puts README_BLOCKS[1].run", requires: [app_path("readme_sidekiq.rb")], env: {"SIDEKIQ" => sidekiq}).chomp
  end

  def run_on_our_server(sidekiq)
    server = ServerProcess.new(app: "readme_sidekiq.rb", args: server_args, env: {"SIDEKIQ" => sidekiq}).start
    wait_until("the job's log line") { server.output.include?("INFO: bob did 5 things\n") }
    expect(server.stop.exitstatus).to eq(0)
    expect(redis.keys("queue:*") + redis.keys("retry") + redis.keys("dead")).to eq([])
  ensure
    server&.ensure_stopped
  end

  it "keeping the sidekiq gem: Sidekiq's client pushes the job, our server runs it, Sidekiq's API and Web load and count it" do
    jid = push("gem")
    expect(JSON.parse(redis.lindex("queue:critical", 0))).to include("jid" => jid, "class" => "HardWorker", "args" => ["bob", 5], "retry" => 5)
    run_on_our_server("gem")
    api = run_ruby("README_BLOCKS[2].run; puts Sidekiq::Stats.new.processed, defined?(Sidekiq::Web)",
      requires: [app_path("readme_sidekiq.rb")], env: {"SIDEKIQ" => "gem"})
    expect(api.split("\n")).to eq(%w[1 constant])
  end

  it "dropping it for require \"queue/compat/sidekiq\": the same worker and push, unchanged" do
    jid = push("shim")
    expect(JSON.parse(redis.lindex("queue:critical", 0))).to include("jid" => jid, "class" => "HardWorker", "args" => ["bob", 5], "retry" => 5)
    run_on_our_server("shim")
  end
end
