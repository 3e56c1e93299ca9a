# frozen_string_literal: true

require_relative "compat_helper"
require "sidekiq/web"
require "rack/mock"
require "rack/session/cookie"

RSpec.describe "Sidekiq 6.4.1's dashboard (Sidekiq::Web) over our server's data", :compat do
  let(:web) do
    Rack::MockRequest.new(Rack::Builder.new do
      use Rack::Session::Cookie, secret: "compat" * 16, same_site: true
      run Sidekiq::Web.new
    end)
  end

  def page(path)
    response = web.get(path)
    expect([path, response.status]).to eq([path, 200])
    response.body
  end

  it "renders every page with our process, busy job, queues, retries, dead and scheduled jobs" do
    server = our_server(args: ["-c", "2", "-q", "default", "-g", "compat-dash"])
    identity = sidekiq_process_of(server).identity
    busy = CompatBlocker.perform_async("busy ✓")
    retrying = CompatFlaky.perform_async("retrying")
    dead = CompatDoomed.perform_async("dead")
    scheduled = CompatEcho.perform_in(3600, "scheduled")
    queued = CompatEcho.set(queue: "parked").perform_async("queued")
    wait_until("the failures to be filed") { Sidekiq::RetrySet.new.size == 1 && Sidekiq::DeadSet.new.size == 1 }
    wait_until("the heartbeat to show the busy job", timeout: 15) { Sidekiq::Workers.new.size == 1 }

    busy_page = page("/busy")
    expect(busy_page).to include(identity, "compat-dash", busy, "CompatBlocker", "busy ✓")
    expect(page("/")).to include("Sidekiq v6.4.1")
    expect(page("/queues")).to include("parked")
    expect(page("/queues/parked")).to include(queued)

    retry_entry = Sidekiq::RetrySet.new.first
    expect(page("/retries")).to include(retrying)
    expect(page("/retries/#{retry_entry.score}-#{retrying}")).to include("CompatError", "no marker for #{retrying} yet")
    dead_entry = Sidekiq::DeadSet.new.first
    expect(page("/morgue")).to include(dead)
    expect(page("/morgue/#{dead_entry.score}-#{dead}")).to include("CompatError", "doomed")
    scheduled_entry = Sidekiq::ScheduledSet.new.first
    expect(page("/scheduled")).to include(scheduled)
    expect(page("/scheduled/#{scheduled_entry.score}-#{scheduled}")).to include("CompatEcho")

    stats = JSON.parse(page("/stats"))["sidekiq"]
    expect(stats).to include("processed" => 2, "failed" => 2, "busy" => 1, "processes" => 1,
      "enqueued" => 1, "scheduled" => 1, "retries" => 1, "dead" => 1)

    redis.rpush("compat:release:#{busy}", "go")
    wait_until("the busy job to finish") { ran_jid(busy) }
    expect(server.stop.exitstatus).to eq(0)
  end
end
