# frozen_string_literal: true

require_relative "web_helper"
require_relative "../apps/api_retry" # the failing workers, for our client's side
require_relative "../apps/web_busy"
require_relative "../apps/api_dedup" # deduplicated workers

# Every page, action and JSON endpoint of JobQueue::Web through Rack::Test, over data the real engine
# wrote: jobs pushed by our client, failed into the retry and dead sets by our server process.
RSpec.describe "JobQueue::Web pages and actions" do
  let(:redis) { TestRedis.client }

  # Runs our server until `retries` jobs wait in the retry set and `dead` are dead, then stops it.
  def fail_jobs(retries: 0, dead: 0)
    server = ServerProcess.new(app: "api_retry.rb", args: ["-c", "2", "-q", "default"]).start
    jids = {retry: Array.new(retries) { |i| ApiFailingWorker.perform_async(3600 + i) },
            dead: Array.new(dead) { ApiFailingWorker.perform_async("kill") }}
    wait_until("the failures to be filed", timeout: 20) { redis.zcard("retry") == retries && redis.zcard("dead") == dead }
    expect(server.stop.exitstatus).to eq(0)
    jids
  ensure
    server&.ensure_stopped
  end

  def key_of(set, jid)
    json, score = redis.zrange(set, 0, -1, with_scores: true).find { |j, _| JSON.parse(j)["jid"] == jid }
    json && "#{score}-#{jid}"
  end

  def queued_jids(queue = "default") = redis.lrange("queue:#{queue}", 0, -1).map { |j| JSON.parse(j)["jid"] }

  describe "the dashboard" do
    it "shows the totals, the history of each day and each queue's latency; the JSON carries the same" do
      fail_jobs(retries: 1, dead: 1)
      EchoWorker.set(queue: "web_mail").perform_async("<img src=x onerror=alert(1)>")
      html = page("/")
      cards = html.scan(%r{<span class="value">([^<]*)</span><span class="label">([^<]*)</span>}).to_h(&:reverse)
      expect(cards).to include("Processed" => "2", "Failed" => "2", "Enqueued" => "1", "Retries" => "1", "Dead" => "1", "Scheduled" => "0")
      expect(html).to include(%(<title>#{Time.now.utc.strftime("%F")}: 2 processed</title>), ">web_mail</a>")
      expect(page("/?days=7").scan("<rect class=\"processed\"").size).to eq(7)

      get "/api/v1/dashboard?days=2"
      body = JSON.parse(last_response.body)
      expect(body).to include("processed" => 2, "failed" => 2, "enqueued" => 1, "retry_size" => 1, "dead_size" => 1)
      expect(body["history"]["processed"]).to eq((Date.today - 1).strftime("%F") => 0, Time.now.utc.strftime("%F") => 2)
    end

    it "draws live samples across refreshes, with a refresh tag" do
      html = page("/?live=5")
      expect(html).to include('<meta http-equiv="refresh" content="5">', "Live (every 5 s)")
      EchoWorker.perform_async(1)
      page("/?live=5")
      expect(last_response.body.scan('<rect class="processed"').size).to eq(1)
    end
  end

  describe "queues" do
    let!(:jids) { Array.new(30) { |i| EchoWorker.perform_async(i, "<b>#{i}</b>") } }

    it "lists queues with size and latency, and a queue's jobs a page at a time, escaped" do
      EchoWorker.set(queue: "web_other").perform_async("x")
      expect(page("/queues")[%r{<a href="/queues/default">default</a>.*?</tr>}m]).to include(">30<")
      first = page("/queues/default")
      expect(first).to include("1–25 of 30", jids.last, "&lt;b&gt;29&lt;/b&gt;", 'rel="next"')
      expect(first).not_to include(jids.first, "<b>29</b>")
      second = page("/queues/default?page=2")
      expect(second).to include("26–30 of 30", jids.first)
      get "/api/v1/queues/default?page=2"
      expect(JSON.parse(last_response.body)).to include("name" => "default", "size" => 30, "page" => 2, "total" => 30)
      expect(JSON.parse(last_response.body)["jobs"].map { |j| j["jid"] }).to eq(jids.first(5).reverse)
      get "/api/v1/queues"
      expect(JSON.parse(last_response.body).map { |q| [q["name"], q["size"]] }).to contain_exactly(["default", 30], ["web_other", 1])
    end

    it "pauses and unpauses a queue: the list, the queue's page and the JSON API show it" do
      expect(submit("/queues/default/pause")).to eq("Paused queue default: no process fetches from it; pushes go on.")
      expect(redis.smembers("jq:paused")).to eq(["default"])
      expect(page("/queues")[%r{<a href="/queues/default">default</a>.*?</tr>}m]).to include(">paused<", "/queues/default/unpause")
      expect(page("/queues/default")).to include("· paused", "/queues/default/unpause")
      get "/api/v1/queues"
      expect(JSON.parse(last_response.body).find { |q| q["name"] == "default" }).to include("paused" => true)
      expect(submit("/queues/default/unpause", "from" => "queue")).to eq("Unpaused queue default.")
      expect(last_request.path).to eq("/queues/default")
      expect(redis.smembers("jq:paused")).to eq([])
      expect(page("/queues")[%r{<a href="/queues/default">default</a>.*?</tr>}m]).to include(">running<", "/queues/default/pause")
    end

    it "lists a paused queue that never had a push, so it can be unpaused" do
      JobQueue::Queue.new("quiet_one").pause!
      expect(page("/queues")).to include('href="/queues/quiet_one"', "/queues/quiet_one/unpause")
    end

    it "deletes one job and clears a queue" do
      value = redis.lrange("queue:default", 0, -1).find { |j| JSON.parse(j)["jid"] == jids[3] }
      expect(submit("/queues/default/delete", "job" => value)).to eq("Deleted job #{jids[3]}.")
      expect(queued_jids).not_to include(jids[3])
      expect(queued_jids.size).to eq(29)
      expect(submit("/queues/default/delete", "job" => value)).to eq("Job #{jids[3]} was no longer in the queue.")
      expect(submit("/queues/default/clear")).to eq("Cleared queue default.")
      expect(redis.exists?("queue:default")).to be(false)
    end
  end

  describe "busy" do
    it "shows a running process and its job; quiet and stop reach it through Redis" do
      server = ServerProcess.new(app: "web_busy.rb", args: ["-c", "2", "-q", "default", "-g", "web-busy"]).start
      begin
        jid = WebBlockerWorker.perform_async(30)
        identity = wait_until("the process to register") { redis.smembers("processes").first }
        wait_until("the heartbeat to show the running job", timeout: 15) { redis.hlen("#{identity}:workers") == 1 }
        html = page("/busy")
        expect(html).to include("web-busy", identity, jid, "WebBlockerWorker", '<td class="num" data-label="Threads">2</td>')
        get "/api/v1/busy"
        busy = JSON.parse(last_response.body)
        expect(busy["processes"].map { |p| p["identity"] }).to eq([identity])
        expect(busy["work"].map { |w| [w["identity"], w["work"]["payload"]["jid"]] }).to eq([[identity, jid]])
        redis.rpush("web:release:#{jid}", "go")

        expect(submit("/busy/quiet", "identity" => identity)).to eq("Asked 1 process to quiet.")
        wait_until("the process to be quiet", timeout: 15) { redis.hget(identity, "quiet") == "true" }
        expect(page("/busy")).to include('<span class="tag warn">quiet</span>')
        expect(submit("/busy/stop", "identity" => "no-such-process")).to eq("No such process.")
        expect(submit("/busy/stop")).to eq("Asked 1 process to stop.")
        expect(server.wait(timeout: 30).exitstatus).to eq(0)
      ensure
        server.ensure_stopped
      end
    end
  end

  describe "scheduled" do
    let!(:jids) { Array.new(3) { |i| ApiScheduledWorker.perform_in(600 * (i + 1), "later #{i}") } }

    it "lists, shows, enqueues now, deletes and kills scheduled jobs" do
      html = page("/scheduled")
      expect(html).to include(*jids, "1–3 of 3")
      key = key_of("schedule", jids[0])
      expect(page("/scheduled/#{key}")).to include(jids[0], "later 0")
      get "/api/v1/scheduled"
      expect(JSON.parse(last_response.body)["entries"].map { |e| e.dig("job", "jid") }).to match_array(jids)
      get "/api/v1/scheduled/#{key}"
      expect(JSON.parse(last_response.body)).to include("key" => key, "job" => a_hash_including("jid" => jids[0]))
      expect(submit("/scheduled/#{key}/retry")).to eq("Queued 1 job.")
      expect(queued_jids).to eq([jids[0]])
      expect(submit("/scheduled/#{key_of("schedule", jids[1])}/kill")).to eq("Killed 1 job.")
      expect(redis.zrange("dead", 0, -1).map { |j| JSON.parse(j)["jid"] }).to eq([jids[1]])
      expect(submit("/scheduled/all/delete")).to eq("Deleted 1 job.")
      expect(redis.zcard("schedule")).to eq(0)
      expect(submit("/scheduled/#{key}/delete")).to eq("That job is no longer in scheduled.")
    end
  end

  describe "retries and dead" do
    let!(:jids) { fail_jobs(retries: 3, dead: 2) }

    it "lists entries with their errors, searches by jid and class, and shows one" do
      html = page("/retries")
      expect(html).to include(*jids[:retry], "ApiRetry::Boom: always fails", "1–3 of 3")
      found = page("/retries?q=#{jids[:retry][1]}")
      expect(found).to include(jids[:retry][1], "1 match for")
      expect(found).not_to include(jids[:retry][0])
      expect(page("/dead?q=ApiFailingWorker")).to include(*jids[:dead], "2 matches")
      expect(page("/dead?q=NoSuchClass")).to include("No job matches")
      key = key_of("dead", jids[:dead][0])
      expect(page("/dead/#{key}")).to include(jids[:dead][0], "api_retry.rb") # the backtrace
      get "/api/v1/retries"
      expect(JSON.parse(last_response.body)).to include("total" => 3, "page" => 1)
      get "/api/v1/dead/#{key}"
      expect(JSON.parse(last_response.body)["job"]["jid"]).to eq(jids[:dead][0])
      get "/api/v1/dead/1.0-nope"
      expect(last_response.status).to eq(404)
    end

    it "retries, kills and deletes one entry" do
      expect(submit("/retries/#{key_of("retry", jids[:retry][0])}/retry")).to eq("Queued 1 job.")
      expect(queued_jids).to eq([jids[:retry][0]])
      expect(submit("/retries/#{key_of("retry", jids[:retry][1])}/kill")).to eq("Killed 1 job.")
      expect(redis.zcard("dead")).to eq(3)
      expect(submit("/dead/#{key_of("dead", jids[:dead][0])}/retry")).to eq("Queued 1 job.")
      expect(queued_jids).to contain_exactly(jids[:retry][0], jids[:dead][0])
      expect(submit("/dead/#{key_of("dead", jids[:dead][1])}/delete")).to eq("Deleted 1 job.")
      expect(redis.zrange("dead", 0, -1).map { |j| JSON.parse(j)["jid"] }).to eq([jids[:retry][1]])
    end

    it "applies an action to the checked entries, back on the same page" do
      keys = jids[:retry].first(2).map { |jid| key_of("retry", jid) }
      post "/retries/bulk", "keys" => keys, "do" => "delete", "page" => "1", "authenticity_token" => csrf_token
      expect(last_response.location).to eq("/retries?page=1")
      follow_redirect!
      expect(last_response.body).to include("Deleted 2 of 2 jobs.")
      expect(redis.zcard("retry")).to eq(1)
      expect(submit("/dead/bulk", "keys" => [key_of("dead", jids[:dead][0]), "1.0-gone"], "do" => "retry")).to eq("Queued 1 of 2 jobs.")
      expect(submit("/dead/bulk", "keys" => [], "do" => "retry")).to eq("No job was checked.")
      expect(submit("/dead/bulk", "keys" => ["x"], "do" => "kill")).to eq("Choose an action.") # not an action of dead
    end

    it "retries, kills or deletes a whole set" do
      expect(submit("/retries/all/kill")).to eq("Killed 3 jobs.")
      expect([redis.zcard("retry"), redis.zcard("dead")]).to eq([0, 5])
      expect(submit("/dead/all/retry")).to eq("Queued 5 jobs.")
      expect(queued_jids.size).to eq(5)
      post "/dead/all/kill", "authenticity_token" => csrf_token
      expect(last_response.status).to eq(404)
    end
  end

  it "pages a set: page numbers, per-page sizes, and a page past the end shows the last" do
    jids = Array.new(60) { |i| ApiScheduledWorker.perform_in(60 + i, i) }
    html = page("/scheduled?per=25&page=2")
    expect(html).to include("26–50 of 60", %(<span class="this" aria-current="page">2</span>), 'href="/scheduled?page=3&amp;per=25"')
    expect(page("/scheduled?per=50&page=9")).to include("51–60 of 60")
    expect(page("/scheduled?per=100")).to include(*jids)
  end

  describe "deduplication keys" do
    def dedup_key(args, queue = "default") = "duplicate:#{queue}:#{Digest::SHA256.hexdigest("DedupExecutingWorker:#{JSON.generate(args)}")}"

    def rows(html) = html.scan(%r{<code class="args">(duplicate:[^<]+)</code></td>\s*<td data-label="Held by"><code class="jid">(\w+)</code>})

    it "lists the keys held with the jid holding each and its TTL; the JSON carries the same" do
      jids = %w[a b c].to_h { |arg| [dedup_key([arg]), DedupExecutingWorker.perform_async(arg)] }
      DedupExecutingWorker.set(queue: "web_other").perform_async("d")
      html = page("/dedup")
      expect(rows(html).size).to eq(4)
      expect(rows(html).to_h.slice(*jids.keys)).to eq(jids)
      expect(html).to include("the walk is complete", ">5 h<", ">web_other<")
      expect(html).not_to include('rel="next"')
      expect(rows(page("/dedup?queue=default")).to_h).to eq(jids)
      expect(page("/dedup?queue=none")).to include("No key is held.")

      get "/api/v1/dedup?queue=default&count=10"
      body = JSON.parse(last_response.body)
      expect(body.slice("cursor", "count", "queue")).to eq("cursor" => 0, "count" => 10, "queue" => "default")
      keys = body["keys"]
      until body["next_cursor"].zero?
        get "/api/v1/dedup?queue=default&count=10&cursor=#{body["next_cursor"]}"
        body = JSON.parse(last_response.body)
        keys += body["keys"]
      end
      expect(keys.to_h { |k| [k["key"], k["jid"]] }).to eq(jids)
      expect(keys.map { |k| k["queue"] }.uniq).to eq(["default"])
      expect(keys.map { |k| k["ttl"] }).to all(be_between(6 * 3600 - 10, 6 * 3600))
    end

    it "walks many keys a step at a time, following the page's links" do
      DedupExecutingWorker.perform_bulk((1..400).map { |i| [i] })
      expect(redis.dbsize).to be > 400
      html = page("/dedup?count=100")
      found = rows(html)
      steps = 1
      while (link = html[/<a href="([^"]+)" rel="next">/, 1])
        expect(link).to include("count=100", "cursor=")
        html = page(CGI.unescapeHTML(link))
        found += rows(html)
        steps += 1
      end
      expect(html).to include("the walk is complete", "Start over")
      expect(steps).to be > 1
      expect(found.map(&:first).uniq).to match_array((1..400).map { |i| dedup_key([i]) })
    end

    it "releases a key by hand, only from the job that holds it, so a duplicate is pushed again" do
      jid = DedupExecutingWorker.perform_async("x")
      key = dedup_key(["x"])
      expect(DedupExecutingWorker.perform_async("x")).to be_nil
      expect(submit("/dedup/delete", "key" => key, "jid" => "someone-else")).to eq("#{key} was no longer held by that job.")
      expect(redis.get(key)).to eq(jid)
      expect(page("/dedup")).to include(%(name="key" value="#{key}"), %(name="jid" value="#{jid}"))
      expect(submit("/dedup/delete", "key" => key, "jid" => jid)).to eq("Released #{key}.")
      expect(redis.exists?(key)).to be(false)
      expect(DedupExecutingWorker.perform_async("x")).to be_a(String)
      expect(submit("/dedup/delete", "key" => "queue:default")).to include("&quot;queue:default&quot; is not an idempotency key")
      expect(redis.llen("queue:default")).to eq(2)

      post "/dedup/delete", "key" => key
      expect(last_response.status).to eq(403)
      expect(redis.exists?(key)).to be(true)
    end
  end

  it "serves its stylesheet, and 404s, 405s and 403s where it should" do
    get "/style.css"
    expect(last_response.content_type).to eq("text/css; charset=utf-8")
    get "/nowhere"
    expect(last_response.status).to eq(404)
    get "/api/v1/nowhere"
    expect([last_response.status, JSON.parse(last_response.body)]).to eq([404, {"error" => "Not found"}])
    get "/retries/all/delete"
    expect(last_response.status).to eq(405)
    post "/queues/default/clear", "authenticity_token" => "forged"
    expect(last_response.status).to eq(403)
    expect(last_response.body).to include("Reload the page")
  end

  it "serves Prometheus metrics at /metrics, with no session or token (JobQueue::Metrics)" do
    fail_jobs(dead: 1)
    get "/metrics", {}, "SCRIPT_NAME" => "/admin/queue"
    expect(last_response.status).to eq(200)
    expect(last_response.content_type).to start_with("application/openmetrics-text")
    expect(last_response.headers["set-cookie"]).to be_nil
    expect(last_response.body).to include('queue_jobs_failed_total{class="ApiFailingWorker",queue="default"} 1', "queue_dead_size 1")
    post "/metrics"
    expect(last_response.status).to eq(405)
  end

  it "escapes every value from a job: class, arguments, error" do
    EchoWorker.set(queue: "<q>").perform_async("</code><script>alert(1)</script>")
    html = page("/queues/%3Cq%3E")
    expect(html).to include("&lt;/code&gt;&lt;script&gt;alert(1)&lt;/script&gt;", "Queue <span class=\"name\">&lt;q&gt;</span>")
    expect(html).not_to include("<script>")
    expect(page("/queues")).to include('href="/queues/%3Cq%3E"')
  end

  it "works mounted under a path (Rails' mount sets SCRIPT_NAME): links and redirects keep it" do
    html = get("/queues", {}, "SCRIPT_NAME" => "/admin/queue").body
    expect(html).to include('href="/admin/queue/style.css"', 'href="/admin/queue/busy"')
  end
end
