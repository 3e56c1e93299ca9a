# frozen_string_literal: true

require_relative "compat_helper"

RSpec.describe "our server's failures, as Sidekiq 6.4.1's RetrySet and DeadSet see them", :compat do
  let(:args) { CompatHelpers::TRICKY_ARGS }

  def only_entry(set, description)
    wait_until("one job in #{description}") { set.new.size == 1 }
    entries = set.new.to_a
    expect(entries.size).to eq(1)
    entries.first
  end

  def backtraces_of(jid)
    redis.lrange("compat:backtraces:#{jid}", 0, -1).map { |b| JSON.parse(b) }
  end

  it "files a failure in the retry set with Sidekiq's fields, and RetrySet#retry_all runs it again on our server" do
    server = our_server
    started = Time.now.to_f
    jid = CompatFlaky.set("tags" => ["flaky"], "custom_field" => {"n" => 2**70}).perform_async(*args)

    entry = only_entry(Sidekiq::RetrySet, "Sidekiq::RetrySet")
    seen = Time.now.to_f
    expect(entry.jid).to eq(jid)
    expect(entry.klass).to eq("CompatFlaky")
    expect(entry.display_class).to eq("CompatFlaky")
    expect(entry.queue).to eq("default")
    expect(entry.args).to eq(JSON.parse(JSON.generate(args)))
    expect(entry.args.inspect).to eq(args.inspect)
    expect(entry.error?).to be(true)
    expect(entry["error_class"]).to eq("CompatError")
    expect(entry["error_message"]).to eq("no marker for #{jid} yet: ✗ \"quoted\"\ttab \u0001")
    expect(entry["retry_count"]).to eq(0)
    expect(entry["retry"]).to be(true)
    expect(entry["failed_at"]).to be_a(Float).and be_between(started, seen)
    expect(entry.item).not_to have_key("retried_at")
    expect(entry.error_backtrace).to be_nil
    expect(entry.tags).to eq(["flaky"])
    expect(entry["custom_field"]).to eq("n" => 2**70)
    # Sidekiq's delay for a first failure: 0**4 + 15 + rand(10) * 1 seconds.
    expect(entry.score).to be_between(entry["failed_at"] + 15, entry["failed_at"] + 24.001)
    stats = Sidekiq::Stats.new
    expect([stats.processed, stats.failed, stats.retry_size, stats.dead_size]).to eq([1, 1, 1, 0])

    redis.set("compat:marker:#{jid}", "1")
    Sidekiq::RetrySet.new.retry_all
    record = wait_for_runs(1, "the retried job to run").first

    expect(record).to include("runner" => "queue #{JobQueue::VERSION}", "class" => "CompatFlaky", "jid" => jid)
    expect_same_args(record, args)
    # Sidekiq's retry takes one off the count so the next failure counts the same; the rest stays.
    expect(record["job"]).to include("retry_count" => -1, "error_class" => "CompatError", "tags" => ["flaky"])
    expect(Sidekiq::RetrySet.new.size).to eq(0)
    expect(Sidekiq::DeadSet.new.size).to eq(0)
    wait_until("the success to be counted") { Sidekiq::Stats.new.processed == 2 }
    expect(Sidekiq::Stats.new.failed).to eq(1)
    expect(server.stop.exitstatus).to eq(0)
  end

  it "sends a retry: 0 job's first failure to the dead set with Sidekiq's fields" do
    server = our_server
    started = Time.now.to_f
    jid = CompatDoomed.perform_async(*args)

    entry = only_entry(Sidekiq::DeadSet, "Sidekiq::DeadSet")
    seen = Time.now.to_f
    expect(entry.jid).to eq(jid)
    expect(entry.klass).to eq("CompatDoomed")
    expect(entry.queue).to eq("default")
    expect(entry.args.inspect).to eq(args.inspect)
    expect(entry["error_class"]).to eq("CompatError")
    expect(entry["error_message"]).to eq("doomed")
    expect(entry["retry_count"]).to eq(0)
    expect(entry["retry"]).to eq(0)
    expect(entry["failed_at"]).to be_a(Float).and be_between(started, seen)
    expect(entry.score).to be_between(started, seen)
    expect(Sidekiq::RetrySet.new.size).to eq(0)
    stats = Sidekiq::Stats.new
    expect([stats.processed, stats.failed, stats.retry_size, stats.dead_size]).to eq([1, 1, 0, 1])
    expect(server.stop.exitstatus).to eq(0)
  end

  it "keeps error_backtrace as Sidekiq decodes it, and sends the job to the dead set once its retries are used up" do
    server = our_server
    jid = CompatTraced.perform_async("trace me", 2**70)
    short_jid = CompatShortTraced.perform_async("short")

    retrying = only_entry(Sidekiq::RetrySet, "Sidekiq::RetrySet")
    expect(retrying.jid).to eq(jid)
    first_trace = backtraces_of(jid).first
    expect(first_trace.first).to match(/compat_queue\.rb:\d+:in `explode'/)
    expect(retrying.error_backtrace).to eq(first_trace)
    expect(retrying["error_message"]).to eq('traced ["trace me", 1180591620717411303424]')

    # Run the retry now, as the dashboard would by moving its time: our scheduler picks it up.
    retrying.reschedule(Time.now.to_f)
    wait_until("the second failure to use up the retries") { Sidekiq::DeadSet.new.map(&:jid).include?(jid) }

    dead = Sidekiq::DeadSet.new.find_job(jid)
    second_trace = backtraces_of(jid).last
    expect(backtraces_of(jid).size).to eq(2)
    expect(dead.error_backtrace).to eq(second_trace)
    expect(dead["retry_count"]).to eq(1)
    expect(dead["failed_at"]).to eq(retrying["failed_at"])
    expect(dead["retried_at"]).to be_a(Float).and be > retrying["failed_at"]
    expect(dead.args).to eq(["trace me", 2**70])
    expect(Sidekiq::RetrySet.new.size).to eq(0)

    short = Sidekiq::DeadSet.new.find_job(short_jid)
    expect(short).not_to be_nil
    short_trace = backtraces_of(short_jid).first
    expect(short_trace.size).to be > 2
    expect(short.error_backtrace).to eq(short_trace.first(2))
    expect(Sidekiq::DeadSet.new.size).to eq(2)
    expect(server.stop.exitstatus).to eq(0)
  end
end
