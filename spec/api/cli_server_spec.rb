# frozen_string_literal: true

require "tmpdir"
require_relative "../apps/basic"

RSpec.describe "exe/queue running a server" do
  let(:redis) { TestRedis.client }

  it "takes weighted queues from -q into the process hash's info" do
    server = start_server(app: "basic.rb", args: ["-c", "3", "-q", "a,2", "-q", "b", "-g", "api-tag"])
    info = registered_process_info

    expect(info).to include(
      "queues" => %w[a b], "weights" => [{"a" => 2, "b" => 1}], "concurrency" => 3, "tag" => "api-tag", "pid" => server.pid,
      "capsules" => {"default" => {"concurrency" => 3, "mode" => "weighted", "weights" => {"a" => 2, "b" => 1}}}
    )
    expect(server.stop.exitstatus).to eq(0)
  end

  it "takes the queues and concurrency of the -e section of a -C file" do
    Dir.mktmpdir("queue-cli-server") do |dir|
      file = File.join(dir, "queue.yml")
      File.write(file, <<~YAML)
        :concurrency: 1
        :queues: [default]
        staging:
          :concurrency: 2
          :queues:
            - [urgent, 3]
            - [default, 1]
      YAML
      start_server(app: "basic.rb", args: ["-C", file, "-e", "staging"])
      expect(registered_process_info).to include(
        "queues" => %w[urgent default], "weights" => [{"urgent" => 3, "default" => 1}], "concurrency" => 2
      )
    end
  end

  # Sidekiq 6.4.1 (cli.rb) prints why -d, -L and -P were removed and starts anyway; the notes are
  # compared with Sidekiq's in spec/compat/cli_habits_spec.rb.
  it "starts and runs jobs with -d, -L and -P, writing no log or pid file" do
    Dir.mktmpdir("queue-removed-flags") do |dir|
      server = start_server(app: "basic.rb", args: ["-d", "-L", "#{dir}/queue.log", "-P", "#{dir}/queue.pid"])
      EchoWorker.perform_async("despite -d")
      ran = wait_until("the job to run") { redis.lindex("ran:echo", 0) }
      expect(JSON.parse(ran)["args"]).to eq(["despite -d"])
      expect(server.output).to include("ERROR: Daemonization mode was removed in Sidekiq 6.0", "queue will only log to STDOUT")
      expect(Dir.children(dir)).to be_empty
      expect(server.stop.exitstatus).to eq(0)
    end
  end

  it "logs every thread's backtrace on TTIN and keeps running" do
    server = start_server(app: "basic.rb", args: ["-c", "2"])
    registered_process_info
    server.signal("TTIN")

    wait_until("the thread dump in the log") do
      server.output.include?("Thread queue-processor-0") && server.output.include?("Thread queue-processor-1")
    end
    expect(server.output).to match(%r{lib/queue/processor\.rb:\d+:in `run'})

    EchoWorker.perform_async("after TTIN")
    ran = wait_until("a job to run after the dump") { redis.lindex("ran:echo", 0) }
    expect(JSON.parse(ran)["args"]).to eq(["after TTIN"])
    expect(server).to be_running
    expect(server.stop.exitstatus).to eq(0)
  end
end
