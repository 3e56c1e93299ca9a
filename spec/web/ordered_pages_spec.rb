# frozen_string_literal: true

require_relative "web_helper"

# The ordered-queue pages and Lowkiq's /api/v1/stats, over morgue entries the engine wrote: an ordered
# worker whose batches fail past max_retry_count, run by the in-process ordered server.
RSpec.describe "JobQueue::Web ordered queues" do
  let(:redis) { TestRedis.client }

  before { JobQueue.config.logger.level = Logger::FATAL } # the failures here are on purpose

  def doomed_worker(name)
    ordered_worker(name) do
      self.max_retry_count = 0
      define_singleton_method(:retry_in) { |_count| 0 }
      define_singleton_method(:perform) { |_batch| raise ArgumentError, "boom <b>&</b>" }
    end
  end

  # Two ids in the morgue of a worker that has one more queued (not yet due).
  let!(:worker) do
    w = doomed_worker("WebOrderedWorker")
    w.perform_async([{id: "a", payload: {"n" => "<script>alert(1)</script>"}}, {id: "b", payload: "pb"}])
    drain(ordered_server(w).thread_work(0))
    w.perform_async([{id: "later", payload: "x", perform_in: Time.now.to_f + 3600}])
    w
  end

  it "serves Lowkiq's /api/v1/stats document" do
    get "/api/v1/stats"
    expect(last_response.content_type).to eq("application/json")
    stats = JSON.parse(last_response.body)
    expect(stats).to eq(JobQueue::Ordered.stats)
    expect(stats.keys).to eq(%w[total by_worker])
    expect(stats["by_worker"]["WebOrderedWorker"]).to include("length" => 1, "morgue_length" => 2)
  end

  it "lists ordered workers with length, lag and morgue size" do
    html = page("/ordered")
    row = html[%r{<tr>\s*<td data-label="Worker"><a href="/ordered/WebOrderedWorker">.*?</tr>}m]
    expect(row).to include(">1<", ">2</a>")
    expect(page("/")).to include("Ordered queues", "2 in the morgue")
  end

  it "shows each shard's length, lag and lease owner, on the page and in /api/v1/ordered" do
    html = page("/ordered")
    table = html[%r{<table class="list shards" id="shards-WebOrderedWorker">.*?</table>}m]
    owners = table.scan(%r{<td data-label="Owner"><code>([^<]+)</code></td>}).flatten
    expect(owners).to eq([OrderedHelpers::IDENTITY] * worker.shards_count)
    expect(table.scan("expires <time").size).to eq(worker.shards_count)

    get "/api/v1/ordered"
    queue = JSON.parse(last_response.body)["queues"].find { |q| q["name"] == "WebOrderedWorker" }
    expect(queue).to include("queue" => worker.queue_name, "shards_count" => worker.shards_count, "length" => 1, "morgue_length" => 2)
    expect(queue["shards"].map { |sh| sh["shard"] }).to eq((0...worker.shards_count).to_a)
    expect(queue["shards"].map { |sh| sh["owner"] }.uniq).to eq([OrderedHelpers::IDENTITY])
    expect(queue["shards"].map { |sh| sh["alive"] }.uniq).to eq([true])
    expect(queue["shards"].map { |sh| sh["lease_expires_at"] }).to all(be_within(20).of(Time.now.to_f + 10))
    expect(queue["shards"].sum { |sh| sh["length"] }).to eq(1)
    expect(queue["shards"].find { |sh| sh["length"] == 1 }["shard"]).to eq(shard_of("later", worker.shards_count))

    ordered_servers.each(&:stop) # leases released
    ordered_servers.clear
    expect(page("/ordered")[%r{<table class="list shards" id="shards-WebOrderedWorker">.*?</table>}m].scan(">free<").size).to eq(worker.shards_count)
  end

  it "pages the morgue with the payloads and errors escaped" do
    html = page("/ordered/WebOrderedWorker?sort=id&per=25")
    expect(html).to include("<code>a</code>", "<code>b</code>", "boom &lt;b&gt;&amp;&lt;/b&gt;", "&lt;script&gt;alert(1)&lt;/script&gt;")
    expect(html).not_to include("<script>", "<b>&</b>")
    get "/api/v1/ordered/WebOrderedWorker/morgue?sort=id"
    expect(JSON.parse(last_response.body)["entries"].map { |e| e["id"] }).to eq(%w[a b])
  end

  it "requeues checked morgue entries, and deletes them" do
    expect(submit("/ordered/WebOrderedWorker/requeue", "ids" => ["a"])).to eq("Requeued 1 morgue entry.")
    expect(redis.zscore(lowkiq_key(worker, "morgue:all_ids_lex"), "a")).to be_nil
    expect(redis.zscore(lowkiq_key(worker, "all_ids_lex"), "a")).not_to be_nil
    expect(submit("/ordered/WebOrderedWorker/delete", "ids" => ["b"])).to eq("Deleted 1 morgue entry.")
    expect(JobQueue::Ordered.stats["by_worker"]["WebOrderedWorker"]["morgue_length"]).to eq(0)
  end

  it "requeues or deletes the whole morgue" do
    expect(submit("/ordered/WebOrderedWorker/delete_all")).to eq("Deleted 2 morgue entries.")
    expect(redis.exists?(lowkiq_key(worker, "morgue:all_ids_lex"))).to be(false)
  end

  it "refuses a POST without the session's token, changing nothing" do
    post "/ordered/WebOrderedWorker/delete_all"
    expect(last_response.status).to eq(403)
    post "/ordered/WebOrderedWorker/delete_all", "authenticity_token" => "forged"
    expect(last_response.status).to eq(403)
    get "/ordered/WebOrderedWorker/delete_all"
    expect(last_response.status).to eq(405)
    expect(JobQueue::Ordered.stats["by_worker"]["WebOrderedWorker"]["morgue_length"]).to eq(2)
  end

  it "answers 404 for an unknown worker or action" do
    get "/ordered/NoSuchWorker"
    expect(last_response.status).to eq(404)
    post "/ordered/WebOrderedWorker/explode", "authenticity_token" => csrf_token
    expect(last_response.status).to eq(404)
    get "/api/v1/ordered/NoSuchWorker/morgue"
    expect(last_response.status).to eq(404)
  end
end
