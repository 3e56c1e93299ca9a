# frozen_string_literal: true

require_relative "compat_helper"

RSpec.describe "jobs pushed by our client, run by a real Sidekiq 6.4.1 process", :compat do
  let(:args) { CompatHelpers::TRICKY_ARGS }
  let(:runner) { "sidekiq #{Sidekiq::VERSION}" }

  it "runs perform_async and perform_bulk jobs with identical arguments and job fields" do
    jid = CompatEcho.perform_async(*args)
    with_fields = CompatEcho.set("tags" => ["ours"], "custom_field" => {"n" => 2**70, "s" => "✓"}).perform_async("x")
    bulk_args = [[1, "one"], ["two", 2.0, nil], [{"three" => [3, 3.5]}], args]
    bulk = CompatEcho.perform_bulk(bulk_args)
    expect(bulk.size).to eq(4)

    server = sidekiq_server
    wait_for_runs(6)

    record = ran_jid(jid)
    expect(record).to include("runner" => runner, "class" => "CompatEcho")
    expect_same_args(record, args)
    expect(record["job"]).to include("class" => "CompatEcho", "queue" => "default", "retry" => true, "jid" => jid)
    expect(record["job"]["created_at"]).to be_a(Float)
    expect(record["job"]["enqueued_at"]).to be_a(Float)

    expect(ran_jid(with_fields)["job"]).to include("tags" => ["ours"], "custom_field" => {"n" => 2**70, "s" => "✓"})
    bulk.zip(bulk_args).each do |bulk_jid, bulk_arg|
      expect(ran_jid(bulk_jid)["runner"]).to eq(runner)
      expect_same_args(ran_jid(bulk_jid), bulk_arg)
    end
    expect(ran.size).to eq(6)
    expect(server.stop.exitstatus).to eq(0)
  end

  it "runs perform_in jobs once Sidekiq's poller finds them due, with identical arguments" do
    server = sidekiq_server
    jid = CompatEcho.perform_in(1, *args)
    later = CompatEcho.set(wait: 1).perform_async("set wait", 2**70)
    expect(Sidekiq::ScheduledSet.new.map(&:jid)).to contain_exactly(jid, later)

    wait_for_runs(2, "Sidekiq to run both scheduled jobs")

    expect(ran_jid(jid)["runner"]).to eq(runner)
    expect_same_args(ran_jid(jid), args)
    expect_same_args(ran_jid(later), ["set wait", 2**70])
    expect(Sidekiq::ScheduledSet.new.size).to eq(0)
    expect(server.stop.exitstatus).to eq(0)
  end
end
