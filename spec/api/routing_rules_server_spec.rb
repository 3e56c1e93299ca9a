# frozen_string_literal: true

require_relative "../apps/routed_workers"

# Routing rules through a real exe/queue process: with no -q it listens to the routed queues, and runs
# the jobs this process pushed there.
RSpec.describe "Routing rules in a server" do
  before { JobQueue.config.routing_rules = RoutedWorkers::RULES } # the suite resets the configuration

  it "listens to the routed queues and runs the jobs pushed to them" do
    RoutedUrgentWorker.perform_async(1)
    RoutedCpuWorker.perform_async(2)
    RoutedPlainWorker.perform_async(3)
    expect(TestRedis.client.smembers("queues")).to match_array(%w[urgent cpu_bound routed_plain])

    server = start_server(app: "routed_workers.rb", args: ["-c", "2"])
    info = registered_process_info
    expect(info["queues"]).to match_array(%w[urgent cpu_bound routed_plain default])
    expect(info["weights"]).to eq(["urgent" => 1, "cpu_bound" => 1, "routed_plain" => 2, "default" => 1])

    wait_until("the three jobs to run") { TestRedis.client.llen("ran:routed") == 3 }
    expect(recorded("ran:routed")).to match_array([
      {"class" => "RoutedUrgentWorker", "queue" => "urgent", "args" => [1]},
      {"class" => "RoutedCpuWorker", "queue" => "cpu_bound", "args" => [2]},
      {"class" => "RoutedPlainWorker", "queue" => "routed_plain", "args" => [3]}
    ])
    expect(server.stop.exitstatus).to eq(0)
  end
end
