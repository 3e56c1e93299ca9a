# frozen_string_literal: true

module ApiSpec
  class MiddlewareWorker
    include JobQueue::Worker
    sidekiq_options queue: "mw"
  end

  # Stamps each job, as a tracing middleware would, and records what it was called with.
  class StampMiddleware
    CALLS = []

    def initialize(stamp = "stamped")
      @stamp = stamp
    end

    def call(worker_class, job, queue, redis_pool)
      CALLS << {worker_class: worker_class, queue: queue, redis_pool: redis_pool, jid: job["jid"]}
      job["stamp"] = @stamp
      yield
    end
  end

  # Moves jobs to another queue.
  class RerouteMiddleware
    def call(_worker_class, job, _queue, _redis_pool)
      job["queue"] = "rerouted"
      yield
    end
  end

  # Drops jobs whose first argument is "drop", as a deduplicating middleware would.
  class DropMiddleware
    def call(_worker_class, job, _queue, _redis_pool)
      yield unless job["args"].first == "drop"
    end
  end
end

RSpec.describe "client middleware" do
  let(:redis) { TestRedis.client }

  before { ApiSpec::StampMiddleware::CALLS.clear }

  def use(*entries)
    JobQueue.configure do |config|
      config.client_middleware { |chain| entries.each { |klass, *args| chain.add(klass, *args) } }
    end
  end

  it "can change the job before it is written" do
    use([ApiSpec::StampMiddleware, "v1"])
    jid = ApiSpec::MiddlewareWorker.perform_async(1)
    expect(queued_jobs("mw").first).to include("jid" => jid, "stamp" => "v1")
  end

  it "is called with the worker class as given, the job, its queue and the redis pool" do
    use([ApiSpec::StampMiddleware])
    jid = ApiSpec::MiddlewareWorker.perform_async
    JobQueue::Client.push("class" => "Remote::Worker", "args" => [], "queue" => "remote")

    expect(ApiSpec::StampMiddleware::CALLS).to match([
      {worker_class: ApiSpec::MiddlewareWorker, queue: "mw", redis_pool: JobQueue.redis_pool, jid: jid},
      {worker_class: "Remote::Worker", queue: "remote", redis_pool: JobQueue.redis_pool, jid: a_string_matching(/\A\h{24}\z/)}
    ])
  end

  # Sidekiq 6.4.1 (client.rb, push): `middleware.invoke(worker_class, item, queue, @redis_pool)`, a
  # ConnectionPool; middleware calls `redis_pool.with { |conn| ... }` for its own keys.
  it "gets a redis_pool that answers with { |conn| ... } on the configured Redis, as Sidekiq's" do
    pool_middleware = Class.new do
      def call(_worker_class, job, _queue, redis_pool)
        redis_pool.with { |conn| conn.incr("pushes:#{job["queue"]}") }
        yield
      end
    end
    stub_const("ApiSpec::PoolMiddleware", pool_middleware)
    use([ApiSpec::PoolMiddleware])
    2.times { ApiSpec::MiddlewareWorker.perform_async }
    expect(redis.get("pushes:mw")).to eq("2")
    expect(redis.llen("queue:mw")).to eq(2)
  end

  it "can send the job to another queue" do
    use([ApiSpec::RerouteMiddleware])
    ApiSpec::MiddlewareWorker.perform_async
    expect(redis.exists?("queue:mw")).to be(false)
    expect(queued_jobs("rerouted").first["queue"]).to eq("rerouted")
    expect(redis.smembers("queues")).to eq(["rerouted"])
  end

  it "stops the push by not yielding: push returns nil and nothing is written" do
    use([ApiSpec::DropMiddleware])
    expect(ApiSpec::MiddlewareWorker.perform_async("drop")).to be_nil
    expect(ApiSpec::MiddlewareWorker.perform_in(60, "drop")).to be_nil
    expect(redis.keys("*")).to be_empty

    expect(ApiSpec::MiddlewareWorker.perform_async("keep")).to match(/\A\h{24}\z/)
    expect(queued_jobs("mw").map { |j| j["args"] }).to eq([["keep"]])
  end

  it "runs in chain order, and a stopped push skips the middleware after it" do
    use([ApiSpec::DropMiddleware], [ApiSpec::StampMiddleware])
    ApiSpec::MiddlewareWorker.perform_async("drop")
    expect(ApiSpec::StampMiddleware::CALLS).to be_empty
  end

  it "runs for every job of a bulk push, leaving out the stopped ones" do
    use([ApiSpec::DropMiddleware], [ApiSpec::StampMiddleware, "bulk"])
    jids = ApiSpec::MiddlewareWorker.perform_bulk([["a"], ["drop"], ["b"]])

    jobs = queued_jobs("mw")
    expect(jobs.map { |j| j["args"] }).to eq([["a"], ["b"]])
    expect(jobs.map { |j| j["jid"] }).to eq(jids)
    expect(jobs).to all(include("stamp" => "bulk"))
    expect(ApiSpec::StampMiddleware::CALLS.map { |c| c[:worker_class] }).to eq([ApiSpec::MiddlewareWorker] * 2)
  end

  it "runs for scheduled jobs, and a changed job is what the schedule holds" do
    use([ApiSpec::StampMiddleware, "later"])
    ApiSpec::MiddlewareWorker.perform_in(300)
    expect(sorted_set_jobs("schedule").first.first["stamp"]).to eq("later")
  end
end
