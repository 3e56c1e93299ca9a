# frozen_string_literal: true

require_relative "compat_helper"

RSpec.describe "a queue renamed under jobs pushed by Sidekiq 6.4.1's client", :compat do
  let(:args) { CompatHelpers::TRICKY_ARGS }

  it "runs them on our server processing only the new queue, with identical arguments and fields" do
    immediate = Sidekiq::Client.push("class" => "CompatEcho", "args" => args, "queue" => "old_name",
                                     "custom_field" => {"n" => 2**70, "f" => 0.1})
    bulk = Sidekiq::Client.push_bulk("class" => "CompatEcho", "args" => [[1], [2]], "queue" => "old_name")
    scheduled = Sidekiq::Client.push("class" => "CompatEcho", "args" => args.reverse, "queue" => "old_name",
                                     "at" => Time.now.to_f + 1)

    expect(JobQueue.migrate_queue("old_name", "new_name")).to eq("queued" => 3, "scheduled" => 1, "retry" => 0, "keys" => 0)
    expect(Sidekiq::Queue.new("old_name").size).to eq(0)
    expect(Sidekiq::Queue.new("new_name").map(&:jid)).to contain_exactly(immediate, *bulk)

    server = our_server(args: ["-q", "new_name", "-c", "2"])
    wait_for_runs(4, "the migrated jobs to run")

    expect_same_args(ran_jid(immediate), args)
    expect(ran_jid(immediate)["job"]).to include("queue" => "new_name", "custom_field" => {"n" => 2**70, "f" => 0.1})
    expect_same_args(ran_jid(scheduled), args.reverse)
    expect(ran_jid(scheduled)["job"]["queue"]).to eq("new_name")
    expect(bulk.map { |jid| ran_jid(jid)["args"] }).to eq([[1], [2]])
    expect(ran.size).to eq(4)
    expect(server.stop.exitstatus).to eq(0)
  end
end
