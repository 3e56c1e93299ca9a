# frozen_string_literal: true

require_relative "web_helper"
require_relative "../compat/compat_helper"
require "sidekiq/web"
require "rack/session/cookie"

# Sidekiq 6.4.1's own Web UI (the Debian gem's `sidekiq/web`), mounted over data only our side wrote:
# jobs pushed by our client, run and failed by our server, our process registered. Each page must show
# our entries where Sidekiq's would be, and its buttons must act on them.
RSpec.describe "Sidekiq 6.4.1's Web UI over our data", :compat do
  def app
    Rack::Builder.new do
      use Rack::Session::Cookie, secret: "sidekiq-web" * 8, same_site: true
      run Sidekiq::Web.new
    end
  end

  # The CSRF token of Sidekiq's forms on a page (its own protection, in our session cookie).
  def sidekiq_token(path)
    page(path)[/name=['"]authenticity_token['"] value=['"]([^'"]+)['"]/, 1] or raise "no form on #{path}"
  end

  it "shows our process, running job, queues, retries, dead and scheduled jobs, and its buttons move them" do
    server = our_server(args: ["-c", "2", "-q", "default", "-g", "web-sidekiq"])
    identity = sidekiq_process_of(server).identity
    busy = CompatBlocker.perform_async("busy <i>")
    retrying = CompatFlaky.perform_async("retrying")
    dead = CompatDoomed.perform_async("dead")
    scheduled = CompatEcho.perform_in(3600, "scheduled")
    queued = CompatEcho.set(queue: "web_idle").perform_async("queued <b>") # no server takes web_idle
    wait_until("the failures to be filed") { redis.zcard("retry") == 1 && redis.zcard("dead") == 1 }
    wait_until("the heartbeat to show the busy job", timeout: 15) { redis.hlen("#{identity}:workers") == 1 }

    # Busy: our process row (identity, tag, concurrency) and the running job with its escaped args.
    busy_page = page("/busy")
    expect(busy_page).to include(identity, "web-sidekiq", busy, "CompatBlocker", "busy &lt;i&gt;")
    expect(busy_page).not_to include("busy <i>")

    # Queues: the queue of the queued job with its size; its page lists that job.
    queues_page = page("/queues")
    expect(queues_page[%r{<a href="/queues/web_idle">web_idle</a>.*?</tr>}m]).to include("<td>1 </td>")
    expect(page("/queues/web_idle")).to include(queued, "queued &lt;b&gt;")

    # Retries, dead, scheduled: our entries with the error our server recorded.
    retry_score = redis.zrange("retry", 0, -1, with_scores: true).first.last
    expect(page("/retries")).to include(retrying, "CompatFlaky", "no marker for #{retrying} yet")
    expect(page("/retries/#{retry_score}-#{retrying}")).to include("CompatError", "Error Class", retrying)
    dead_score = redis.zrange("dead", 0, -1, with_scores: true).first.last
    expect(page("/morgue")).to include(dead, "CompatDoomed", "doomed")
    expect(page("/scheduled")).to include(scheduled, "CompatEcho")

    stats = JSON.parse(page("/stats"))["sidekiq"]
    expect(stats).to include("processed" => 2, "failed" => 2, "busy" => 1, "processes" => 1,
      "enqueued" => 1, "scheduled" => 1, "retries" => 1, "dead" => 1)

    # Its "Retry Now" on our retry entry: the job goes back to our queue and our server runs it.
    redis.set("compat:marker:#{retrying}", "1")
    post "/retries/#{retry_score}-#{retrying}", "retry" => "Retry Now", "authenticity_token" => sidekiq_token("/retries/#{retry_score}-#{retrying}")
    expect(last_response.status).to eq(302)
    wait_until("our server to run the retried job") { ran_jid(retrying) }
    expect(redis.zcard("retry")).to eq(0)

    # Its "Delete" on our dead entry.
    post "/morgue/#{dead_score}-#{dead}", "delete" => "Delete", "authenticity_token" => sidekiq_token("/morgue/#{dead_score}-#{dead}")
    expect(last_response.status).to eq(302)
    expect(redis.zcard("dead")).to eq(0)

    redis.rpush("compat:release:#{busy}", "go")
    wait_until("the busy job to finish") { ran_jid(busy) }
    expect(server.stop.exitstatus).to eq(0)
  end
end
