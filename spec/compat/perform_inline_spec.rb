# frozen_string_literal: true

require_relative "compat_helper"

module InlineSpec
  RECEIVED = []

  # Both workers record what `perform` received, and the logger it sees.
  class OurWorker
    include JobQueue::Worker

    def perform(*args)
      RECEIVED << [args, jid, logger]
    end
  end

  class SidekiqWorker
    include Sidekiq::Worker

    def perform(*args)
      RECEIVED << [args, jid, logger]
    end
  end

  # A client middleware that stops jobs whose first argument is "stop", and one that records the
  # redis pool it gets; a server middleware that records the job hash it runs.
  class StopClient
    def call(_worker_class, job, _queue, redis_pool)
      RECEIVED << [:client_pool, redis_pool.with { |conn| conn.ping }]
      yield unless job["args"].first == "stop"
    end
  end

  class SeeServer
    def call(_worker, job, queue)
      RECEIVED << [:server, job["args"], queue]
      yield
    end
  end
end

# Sidekiq 6.4.1's Worker::Setter#perform_inline (alias perform_sync): client middleware with the
# redis pool, the job through JSON (Sidekiq.load_json(Sidekiq.dump_json(item))), a new worker with the
# job's jid, server middleware, `perform`; true, or nil when a middleware stopped it. Run on both with
# the same arguments and middleware, compared.
#
# Sidekiq 6.4.1's perform_inline calls `String#constantize`, which only ActiveSupport defines (a Rails
# app has it): each example here supplies ActiveSupport's behaviour for its duration.
RSpec.describe "Worker.perform_inline", :compat do
  around do |example|
    String.define_method(:constantize) { Object.const_get(self) }
    example.run
  ensure
    String.send(:remove_method, :constantize)
  end

  before { InlineSpec::RECEIVED.clear }

  after do
    Sidekiq.client_middleware.clear
    Sidekiq.server_middleware.clear
  end

  def inline(worker, *args, via: :perform_inline)
    InlineSpec::RECEIVED.clear
    result = worker.public_send(via, *args)
    [result, InlineSpec::RECEIVED.dup]
  end

  it "gives perform the arguments as JSON gives them back, as Sidekiq does" do
    ours, = inline(InlineSpec::OurWorker, *CompatHelpers::TRICKY_ARGS).last.first
    theirs, = inline(InlineSpec::SidekiqWorker, *CompatHelpers::TRICKY_ARGS).last.first
    expect(ours).to eq(theirs)
    expect(Marshal.dump(ours)).to eq(Marshal.dump(theirs))
  end

  it "turns Symbols into Strings on the way through JSON with strict_args!(false), as Sidekiq does" do
    JobQueue.strict_args!(false)
    Sidekiq.strict_args!(false)
    args = [:sym, {sym_key: [:a, 1]}, "s"]
    ours, = inline(InlineSpec::OurWorker, *args).last.first
    theirs, = inline(InlineSpec::SidekiqWorker, *args).last.first
    expect(ours).to eq(theirs)
    expect(ours).to eq(["sym", {"sym_key" => ["a", 1]}, "s"])
  end

  it "raises at the call for complex arguments under strict_args!, as Sidekiq does" do
    expect { InlineSpec::OurWorker.perform_inline(:sym) }.to raise_error(ArgumentError, /args\[0\] is a Symbol/)
    expect { InlineSpec::SidekiqWorker.perform_inline(:sym) }.to raise_error(ArgumentError, /must be native JSON types/)
  end

  it "runs client middleware (with a pool that answers with) and server middleware, returning true or nil as Sidekiq does" do
    JobQueue.configure do |config|
      config.client_middleware { |chain| chain.add InlineSpec::StopClient }
      config.server_middleware { |chain| chain.add InlineSpec::SeeServer }
    end
    Sidekiq.client_middleware { |chain| chain.add InlineSpec::StopClient }
    Sidekiq.server_middleware { |chain| chain.add InlineSpec::SeeServer }

    ours_ran = inline(InlineSpec::OurWorker, "go", 1)
    theirs_ran = inline(InlineSpec::SidekiqWorker, "go", 1)
    expect(ours_ran.first).to be(true)
    expect(theirs_ran.first).to be(true)
    # [:client_pool, "PONG"], [:server, args, queue], [args, jid, logger]
    expect(ours_ran.last.first(2)).to eq(theirs_ran.last.first(2))
    expect(ours_ran.last.first(2)).to eq([[:client_pool, "PONG"], [:server, ["go", 1], "default"]])

    ours_stopped = inline(InlineSpec::OurWorker, "stop")
    theirs_stopped = inline(InlineSpec::SidekiqWorker, "stop")
    expect(ours_stopped).to eq([nil, [[:client_pool, "PONG"]]])
    expect(theirs_stopped).to eq(ours_stopped)
  end

  it "gives the worker a jid and the configured logger, as Sidekiq gives its own" do
    _, ((_, our_jid, our_logger)) = inline(InlineSpec::OurWorker, 1)
    _, ((_, their_jid, their_logger)) = inline(InlineSpec::SidekiqWorker, 1)
    expect(our_jid).to match(/\A\h{24}\z/)
    expect(their_jid).to match(/\A\h{24}\z/)
    expect(our_logger).to be(JobQueue.logger)
    expect(their_logger).to be(Sidekiq.logger)
  end

  it "is also perform_sync, and set(...).perform_inline takes the options, as Sidekiq's Setter" do
    JobQueue.configure { |config| config.server_middleware { |chain| chain.add InlineSpec::SeeServer } }
    Sidekiq.server_middleware { |chain| chain.add InlineSpec::SeeServer }
    ours = inline(InlineSpec::OurWorker.set(queue: "elsewhere"), 2, via: :perform_sync)
    theirs = inline(InlineSpec::SidekiqWorker.set(queue: "elsewhere"), 2, via: :perform_sync)
    expect(ours.last.first).to eq([:server, [2], "elsewhere"])
    expect(theirs.last.first).to eq(ours.last.first)
  end

  it "runs inline for set(\"sync\" => true).perform_async, as Sidekiq's Setter" do
    expect(InlineSpec::OurWorker.set("sync" => true).perform_async(3)).to be(true)
    expect(InlineSpec::SidekiqWorker.set("sync" => true).perform_async(3)).to be(true)
    expect(InlineSpec::RECEIVED.map(&:first)).to eq([[3], [3]])
    expect(redis.llen("queue:default")).to eq(0)
  end

  # Sidekiq 6.4.1's Setter keeps set()'s keys as given and asks for @opts["sync"], so the Symbol
  # `sync: true` is pushed instead; ours reads both (set() keys are Strings throughout), as the option
  # is meant.
  it "also runs inline for set(sync: true), where Sidekiq 6.4.1 pushes (a deliberate difference)" do
    expect(InlineSpec::OurWorker.set(sync: true).perform_async(4)).to be(true)
    expect(InlineSpec::SidekiqWorker.set(sync: true).perform_async(4)).to match(/\A\h{24}\z/)
    expect(InlineSpec::RECEIVED.map(&:first)).to eq([[4]])
  end

  it "writes nothing to Redis and leaves exceptions to the caller" do
    failing = Class.new { include JobQueue::Worker; def perform = raise(ArgumentError, "boom") }
    stub_const("InlineSpec::Failing", failing)
    expect { InlineSpec::Failing.perform_inline }.to raise_error(ArgumentError, "boom")
    expect(redis.keys("*")).to be_empty
  end
end
