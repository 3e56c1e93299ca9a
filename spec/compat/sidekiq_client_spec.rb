# frozen_string_literal: true

require_relative "compat_helper"

# A Sidekiq::Worker class of the app that pushes with Sidekiq's client. Our server runs jobs of this
# name with the SidekiqEcho of spec/apps/compat_queue.rb.
class SidekiqEcho
  include Sidekiq::Worker
  sidekiq_options queue: "sidekiq_pushed"
end

RSpec.describe "jobs pushed by Sidekiq 6.4.1's client, run by our server", :compat do
  let(:args) { CompatHelpers::TRICKY_ARGS }

  it "runs perform_async and Sidekiq::Client.push jobs with identical arguments and job fields" do
    pushed_by_class = SidekiqEcho.perform_async(*args)
    pushed_by_name = Sidekiq::Client.push(
      "class" => "CompatEcho", "args" => args, "queue" => "default",
      "tags" => ["compat"], "custom_field" => {"trace" => "✓", "n" => 2**70}
    )
    bulk = Sidekiq::Client.push_bulk("class" => "CompatEcho", "args" => [[1, "one"], [2, {"two" => [2.0]}]])
    expect([pushed_by_class, pushed_by_name, *bulk]).to all(match(/\A\h{24}\z/))

    server = our_server(args: ["-q", "sidekiq_pushed", "-q", "default", "-c", "2"])
    wait_for_runs(4)

    by_class = ran_jid(pushed_by_class)
    expect(by_class).to include("runner" => "queue #{JobQueue::VERSION}", "class" => "SidekiqEcho")
    expect_same_args(by_class, args)
    expect(by_class["job"]).to include("class" => "SidekiqEcho", "queue" => "sidekiq_pushed", "retry" => true)

    by_name = ran_jid(pushed_by_name)
    expect(by_name).to include("runner" => "queue #{JobQueue::VERSION}", "class" => "CompatEcho")
    expect_same_args(by_name, args)
    expect(by_name["job"]).to include(
      "queue" => "default", "tags" => ["compat"], "custom_field" => {"trace" => "✓", "n" => 2**70}
    )
    expect(by_name["job"]["enqueued_at"]).to be_a(Float)
    expect(by_name["job"]["created_at"]).to be_a(Float)

    expect_same_args(ran_jid(bulk[0]), [1, "one"])
    expect_same_args(ran_jid(bulk[1]), [2, {"two" => [2.0]}])
    expect(ran.size).to eq(4)
    expect(Sidekiq::Queue.new("default").size + Sidekiq::Queue.new("sidekiq_pushed").size).to eq(0)
    expect(server.stop.exitstatus).to eq(0)
  end

  it "runs perform_in and scheduled Sidekiq::Client.push jobs when they are due, with identical arguments" do
    server = our_server
    scheduled_at = Time.now.to_f + 1
    by_name = Sidekiq::Client.push("class" => "CompatEcho", "args" => args, "at" => scheduled_at)
    by_class = SidekiqEcho.set(queue: "default").perform_in(1, *args.reverse)
    expect(Sidekiq::ScheduledSet.new.map(&:jid)).to contain_exactly(by_name, by_class)

    wait_for_runs(2, "both scheduled jobs to run")

    expect_same_args(ran_jid(by_name), args)
    expect_same_args(ran_jid(by_class), args.reverse)
    expect(ran_jid(by_class)["class"]).to eq("SidekiqEcho")
    ran.each do |record|
      expect(record["job"]["enqueued_at"]).to be >= scheduled_at - 1
      expect(record["job"]).not_to have_key("at")
    end
    expect(Sidekiq::ScheduledSet.new.size).to eq(0)
    expect(server.stop.exitstatus).to eq(0)
  end
end
