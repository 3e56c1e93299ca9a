# frozen_string_literal: true

require "tmpdir"
require "yaml"
require "queue/rails_integration/config_file"
require_relative "../support/readme"

# `config.redis[:wait_replicas]` (issue #22 point 1): every push waits for that many replicas (Redis's
# WAIT); fewer within `wait_timeout:` raises JobQueue::ReplicationError and nothing is pushed again.
# The suite's Redis has no replica, so every push here is one that no replica confirms; the failover
# specs (spec/reliability/sentinel_failover_spec.rb) run it against a real replica.
RSpec.describe "wait_replicas" do
  class WaitReplicasWorker
    include JobQueue::Worker
  end

  let(:config) { JobQueue::Configuration.new }

  it "takes wait_replicas: and wait_timeout: (ms, 1000 unless given), for the engine only" do
    expect(JobQueue::RedisOptions.new(url: "redis://h/0").engine_wait).to be_nil
    expect(JobQueue::RedisOptions.new(wait_replicas: 1).engine_wait).to eq([1, 1000])
    options = JobQueue::RedisOptions.new(url: "redis://h/0", wait_replicas: 2, wait_timeout: 250)
    expect(options.engine_wait).to eq([2, 250])
    expect(options.client_options).to eq(url: "redis://h/0")
  end

  it "refuses a bad count or timeout, naming the option" do
    bad = [
      [{wait_replicas: 0}, /invalid redis option wait_replicas: 0; give how many replicas/],
      [{wait_replicas: "1"}, /invalid redis option wait_replicas: "1"/],
      [{wait_replicas: 1, wait_timeout: 0}, /invalid redis option wait_timeout: 0; give milliseconds/],
      [{wait_replicas: 1, wait_timeout: 1.5}, /invalid redis option wait_timeout: 1.5/],
      [{wait_timeout: 100}, /wait_timeout: needs wait_replicas:/]
    ]
    bad.each do |options, message|
      expect { config.redis = options }.to raise_error(ArgumentError, message), "for #{options.inspect}"
    end
  end

  it "reads them from config/queue.yml's redis: section" do
    Dir.mktmpdir do |dir|
      path = File.join(dir, "queue.yml")
      File.write(path, <<~YAML)
        production:
          redis:
            url: redis://127.0.0.1:6379/0
            wait_replicas: 1
            wait_timeout: 300
      YAML
      JobQueue::RailsIntegration::ConfigFile.apply(path, "production", config)
    end
    expect(config.redis_options.engine_wait).to eq([1, 300])
  end

  it "takes README's Redis Sentinel example, in Ruby and in config/queue.yml, as the same settings" do
    ruby, = Readme.blocks("### Redis Sentinel", count: 1)
    yaml, = Readme.blocks("### Redis Sentinel", lang: "yaml", count: 1)
    config = JobQueue::Configuration.new
    ruby.run(binding)
    expect(config.redis_options.engine_wait).to eq([1, 1000])
    expect(config.redis_options.engine_sentinel).to eq(["mymaster", [["10.0.0.1", 26_379], ["10.0.0.2", 26_379], ["10.0.0.3", 26_379]], nil, nil])

    from_file = JobQueue::Configuration.new
    Dir.mktmpdir do |dir|
      path = File.join(dir, "queue.yml")
      File.write(path, yaml.code.lines.reject { |l| l.start_with?("#") }.join)
      JobQueue::RailsIntegration::ConfigFile.apply(path, "production", from_file)
    end
    expect(from_file.redis_options.engine_wait).to eq([1, 1000])
    expect(from_file.redis_options.engine_sentinel).to eq(["mymaster", [["10.0.0.1", 26_379], ["10.0.0.2", 26_379]], nil, nil])
  end

  it "raises JobQueue::ReplicationError from every push no replica confirms, and pushes once" do
    JobQueue.configure { |c| c.redis = {url: TestRedis.url, wait_replicas: 1, wait_timeout: 20} }
    message = /push not confirmed by 1 replica\(s\): WAIT answered only 0 within 20 ms .*not pushed again/
    pushes = {
      "perform_async" => -> { WaitReplicasWorker.perform_async(1) },
      "perform_in" => -> { WaitReplicasWorker.perform_in(60, 2) },
      "perform_bulk" => -> { WaitReplicasWorker.perform_bulk([[3], [4]]) },
      "Client.push" => -> { JobQueue::Client.push("class" => "WaitReplicasWorker", "args" => [5], "custom" => Object.new.to_s) }
    }
    pushes.each do |name, push|
      expect { push.call }.to raise_error(JobQueue::ReplicationError, message), name
    end
    expect(JobQueue::ReplicationError.ancestors).to include(JobQueue::RedisError)
    # Each push wrote its jobs once, and the error did not break the connection.
    expect(TestRedis.client.llen("queue:default")).to eq(4)
    expect(TestRedis.client.zcard("schedule")).to eq(1)
    JobQueue.configure { |c| c.redis = {url: TestRedis.url} }
    expect(WaitReplicasWorker.perform_async(6)).to match(/\A\h{24}\z/)
  end
end
