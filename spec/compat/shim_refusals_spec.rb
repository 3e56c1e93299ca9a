# frozen_string_literal: true

require_relative "shim_helper"

# What the compat shims do not support raises where the app calls it, naming what to use instead; and
# the shims never stand in for a real gem that is loaded, or that the app asked for without them.
RSpec.describe "queue/compat shims: refusals and the real gems", :shim do
  # Runs each snippet after `requires` in one process; returns [error class, message] (or "ok") each.
  def outcomes(requires, snippets)
    code = <<~RUBY
      #{snippets.inspect}.each do |snippet|
        result = begin
          eval(snippet)
          "ok"
        rescue StandardError, NotImplementedError => e
          [e.class.name, e.message]
        end
        puts JSON.generate(result)
      end
    RUBY
    run_ruby(code, requires: requires).lines.map { |l| JSON.parse(l) }
  end

  it "refuses Sidekiq options, settings and classes it does not support, naming the replacement" do
    results = outcomes(["queue/compat/sidekiq"], [
      'class PoolWorker; include Sidekiq::Worker; sidekiq_options pool: Object.new; end',
      'class UniqueWorker; include Sidekiq::Worker; end; UniqueWorker.set(unique_for: 60)',
      'Sidekiq.options[:max_retries] = 3',
      'Sidekiq.configure_client { |c| c[:fetch] = Object }',
      'Sidekiq.options[:no_such_option]',
      'Sidekiq.redis = Object.new',
      'Sidekiq::Client.new(Object.new)',
      'Sidekiq::Web',
      'Sidekiq::RetrySet.new',
      'require "sidekiq/api"',
      'require "sidekiq/web"',
      'Sidekiq::Worker.jobs',
      'Sidekiq.default_job_options = {"retry" => 3}; Sidekiq.average_scheduled_poll_interval = 2; Sidekiq[:queues] = %w[a b]; raise "bad" unless JobQueue.config.default_job_options["retry"] == 3 && JobQueue.config.queue_names == %w[a b] && Sidekiq.options[:max_retries] == 25'
    ])
    expect(results[0]).to eq(["ArgumentError", "PoolWorker.sidekiq_options: option :pool is not supported by queue; queue has one Redis per app (`config.redis`); sharding jobs over Redis pools is not available"])
    expect(results[1]).to match(["ArgumentError", /UniqueWorker.set: option :unique_for .*deduplicate :until_executed/])
    expect(results[2]).to match(["ArgumentError", /max_retries.*sidekiq_options retry: N/])
    expect(results[3]).to match(["ArgumentError", /:fetch.*reliable already/])
    expect(results[4]).to match(["ArgumentError", /:no_such_option.*known keys: concurrency/])
    expect(results[5]).to match(["ArgumentError", /settings Hash/])
    expect(results[6]).to match(["ArgumentError", /Sidekiq::Client.new\(redis_pool\) is not supported/])
    expect(results[7]).to match(["NotImplementedError", /Sidekiq::Web .*mount the real Sidekiq::Web/])
    expect(results[8]).to match(["NotImplementedError", /Sidekiq::RetrySet .*require "sidekiq\/api" first/])
    expect(results[9]).to eq("ok") # sidekiq/api maps onto JobQueue's API (the next example)
    expect(results[10]).to match(["NotImplementedError", /require "sidekiq\/web"/])
    expect(results[11]).to match(["NoMethodError", /require "sidekiq\/testing"/])
    expect(results[12]).to eq("ok")
  end

  it "maps sidekiq/api onto JobQueue's inspection API" do
    code = <<~RUBY
      require "sidekiq/api"
      class ApiShimWorker; include Sidekiq::Worker; end
      jid = ApiShimWorker.perform_async(1)
      queue = Sidekiq::Queue.new("default")
      raise "not JobQueue's" unless queue.instance_of?(JobQueue::Queue) && Sidekiq::RetrySet.equal?(JobQueue::RetrySet)
      found = queue.find_job(jid)
      puts JSON.generate([queue.size, found.klass, found.args, Sidekiq::Stats.new.enqueued, Sidekiq::RetrySet.new.size])
      found.delete
      puts Sidekiq::Queue.new("default").size
    RUBY
    sizes, after = run_ruby(code, requires: ["queue/compat/sidekiq"]).lines
    expect(JSON.parse(sizes)).to eq([1, "ApiShimWorker", [1], 1, 0])
    expect(after.to_i).to eq(0)
    expect(TestRedis.client.llen("queue:default")).to eq(0)
  end

  it "refuses Lowkiq settings and classes it does not support, naming the replacement" do
    results = outcomes(["queue/compat/lowkiq"], [
      'Lowkiq.format_error = 42',
      'Lowkiq.dump_error = ->(m) { m }',
      'Lowkiq::Web',
      'module W; extend Lowkiq::Worker; end; W.client_queue',
      'Lowkiq.workers = [Object]',
      'Lowkiq.redis = -> { Object.new }',
      'JobQueue.server!; Lowkiq.build_scheduler = -> { Object.new }',
      'Lowkiq.build_splitter = -> { Lowkiq.build_by_node_splitter(2, 5) }',
      'Lowkiq.build_splitter = -> { Lowkiq.build_by_node_splitter(2, 1) }; raise "bad" unless JobQueue.config.ordered_splitter_spec == ["by_node", 2, 1]'
    ])
    expect(results[0]).to match(["ArgumentError", /ordered_error_format must respond to call/])
    expect(results[1]).to match(["NotImplementedError", /Lowkiq.dump_error = /])
    expect(results[2]).to match(["NotImplementedError", /Lowkiq::Web .*JobQueue::Ordered.stats/])
    expect(results[3]).to match(["NotImplementedError", /W.client_queue .*JobQueue::Ordered/])
    expect(results[4]).to match(["ArgumentError", /Lowkiq.workers: Object did not `extend Lowkiq::Worker`/])
    expect(results[5]).to match(["ArgumentError", /not a redis-rb client/])
    expect(results[6]).to match(["ArgumentError", /custom schedulers are not supported/])
    expect(results[7]).to match(["ArgumentError", /QUEUE_NODE_NUMBER must be from 0 to/])
    expect(results[8]).to eq("ok")
  end

  it "raises a clear error when the real sidekiq gem is loaded first" do
    out = run_ruby('begin; require "queue/compat/sidekiq"; rescue JobQueue::Compat::GemLoaded => e; puts e.message; end', requires: ["sidekiq"])
    expect(out).to include("the sidekiq gem is already loaded. Its own Sidekiq::Worker classes run unchanged")
  end

  it "makes the app's own require \"sidekiq\" load the shim, and leaves the real gem alone when the shim was not asked for" do
    with_shim = run_ruby('require "sidekiq"; require "sidekiq/testing"; puts Sidekiq.queue_compat?, $LOADED_FEATURES.grep(%r{/gems/sidekiq}).size', requires: ["queue/compat/sidekiq"])
    expect(with_shim.split).to eq(%w[true 0])
    without = run_ruby('require "sidekiq"; puts Sidekiq.respond_to?(:queue_compat?), $LOADED_FEATURES.grep(%r{/gems/sidekiq-6.4.1/lib/sidekiq.rb}).size', requires: ["queue", "queue/compat"])
    expect(without.split).to eq(%w[false 1])
  end
end
