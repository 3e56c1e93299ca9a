# frozen_string_literal: true

require "json"
require "queue/api"

# Capsules (Sidekiq 7's `config.capsule`): one exe/queue process with the default capsule (-c 3 on
# `default`) and a "single" capsule of one thread on `single`, configured three ways
# (spec/apps/capsules.rb). Jobs push through the spec's own client, by class name.
RSpec.describe "capsules in one server process" do
  let(:redis) { TestRedis.client }

  def push(queue, wait, count)
    JobQueue::Client.push_bulk("class" => "CapsuleJob", "queue" => queue, "args" => Array.new(count) { [queue, wait] })
  end

  def run_both(via)
    push("single", 0.3, 4) # each waits up to 0.3 s for a second "single" job to run beside it
    push("default", 5, 4) # each waits (up to 5 s) for a second "default" job beside it
    server = start_server(app: "capsules.rb", args: ["-c", "3", "-q", "default"], env: {"CAPSULES_VIA" => via.to_s})
    info = registered_process_info
    wait_until("the eight jobs to run", timeout: 30) { redis.llen("caps:ran") == 8 }
    expect(server.stop.exitstatus).to eq(0)
    [info, recorded("caps:ran")]
  end

  shared_examples "a capsule of one thread" do |via|
    it "never runs two of its jobs at once while the default capsule runs its jobs in parallel (#{via})" do
      _info, ran = run_both(via)
      expect(redis.get("caps:max:single").to_i).to eq(1)
      expect(redis.get("caps:max:default").to_i).to be >= 2
      threads = ran.group_by { |r| r["queue"] }.transform_values { |rs| rs.map { |r| r["thread"] }.uniq }
      expect(threads["single"]).to eq(["queue-single-0"])
      expect(threads["default"]).to all(match(/\Aqueue-processor-\d\z/))
    end
  end

  include_examples "a capsule of one thread", :api
  include_examples "a capsule of one thread", :shim
  include_examples "a capsule of one thread", :default_configuration

  it "registers one process whose info lists each capsule as Sidekiq 8.0.9 writes it" do
    info, = run_both(:api)
    expect(info).to include(
      "concurrency" => 4,
      "queues" => %w[default single],
      "weights" => [{"default" => 0}, {"single" => 0}],
      "capsules" => {"default" => {"concurrency" => 3, "mode" => "strict", "weights" => {"default" => 0}},
                     "single" => {"concurrency" => 1, "mode" => "strict", "weights" => {"single" => 0}}}
    )
  end

  it "lists one process in ProcessSet with the capsules' threads while it runs" do
    push("single", 5, 1)
    server = start_server(app: "capsules.rb", args: ["-c", "2", "-q", "default"])
    wait_until("the single job to run") { redis.get("caps:running:single").to_i == 1 }
    processes = wait_until("the beat to show it busy") { JobQueue::ProcessSet.new.to_a.then { |ps| ps if ps.first&.[]("busy").to_i == 1 } }
    expect(processes.size).to eq(1)
    expect(processes.first["concurrency"]).to eq(3)
    expect(JobQueue::Workers.new.map { |_process, _tid, work| work["queue"] }).to eq(["single"])
    expect(server.stop.exitstatus).to eq(0)
  end

  it "configures what the README's example says" do
    Readme.blocks("### Capsules", count: 1).first.run
    expect(JobQueue.config.capsules.keys).to eq(["single"])
    expect(JobQueue.config.capsules["single"]).to have_attributes(concurrency: 1, queues: ["single"], mode: :strict)
    expect(JobQueue.config.total_concurrency).to eq(JobQueue.config.concurrency + 1)
  end

  it "records a weighted capsule's weights and mode as Sidekiq 7's Capsule does" do
    cap = JobQueue.config.capsule("w") { |c| c.queues = %w[a,3 b] }
    expect([cap.weights, cap.mode, cap.queue_weights, cap.strict_order?]).to eq([{"a" => 3, "b" => 0}, :weighted, [["a", 3], ["b", 1]], false])
    cap.queues = %w[a,1 b,1]
    expect(cap.mode).to eq(:random)
  end

  it "refuses a bad capsule where it is configured" do
    expect { JobQueue.config.capsule("x") { |c| c.concurrency = 0 } }.to raise_error(ArgumentError, /capsule "x": concurrency must be a positive Integer/)
    expect { JobQueue.config.capsule("x") { |c| c.queues = [] } }.to raise_error(ArgumentError, /capsule "x": at least one queue/)
    expect { JobQueue.config.capsule(" ") }.to raise_error(ArgumentError, /needs a name/)
  end
end
