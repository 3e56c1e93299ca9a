# frozen_string_literal: true

require "tmpdir"
require "queue/rails_integration/config_file"

# config/queue.yml's `redis:` and `routing_rules:` as the Railtie reads them (the rest of the file is
# the CLI's).
RSpec.describe JobQueue::RailsIntegration::ConfigFile do
  around do |example|
    Dir.mktmpdir("queue-yml") do |dir|
      @path = File.join(dir, "queue.yml")
      example.run
    end
  end

  def settings(yaml, environment)
    File.write(@path, yaml)
    described_class.redis_settings(@path, environment)
  end

  it "reads redis: at the top level, after ERB, overridden by the environment's section" do
    yaml = <<~YAML
      :concurrency: 5
      redis:
        url: <%= "redis://top:6379/" + "1" %>
      production:
        :redis:
          url: redis://prod:6379/2
          password: secret
    YAML
    expect(settings(yaml, "development")).to eq(url: "redis://top:6379/1")
    expect(settings(yaml, "production")).to eq(url: "redis://prod:6379/2", password: "secret")
  end

  it "gives nothing without redis: and says where a redis: that is not a mapping is" do
    expect(settings(":concurrency: 5\n", "test")).to be_nil
    expect { settings("redis: redis://x\n", "test") }.to raise_error(ArgumentError, /queue.yml: redis: must be a mapping/)
  end

  it "applies to the configuration, and leaves it alone without a file" do
    config = JobQueue::Configuration.new
    File.write(@path, "redis:\n  url: redis://127.0.0.1:6390/3\n")
    described_class.apply(@path, "test", config)
    expect(config.redis_url).to start_with("redis://127.0.0.1:6390/3")
    expect { described_class.apply(File.join(File.dirname(@path), "missing.yml"), "test", config) }.not_to(change { config.redis_url })
  end

  it "applies routing_rules:, the environment's over the top level's, and leaves the rules alone without" do
    File.write(@path, <<~YAML)
      routing_rules:
        - ["urgency=high", "urgent"]
        - ["resource_boundary=cpu", "cpu_bound", "jobs_b"]
        - ["*", null]
      production:
        :routing_rules:
          - ["*", "default"]
    YAML
    config = JobQueue::Configuration.new
    described_class.apply(@path, "test", config)
    expect(config.routing_rules).to eq([["urgency=high", "urgent"], ["resource_boundary=cpu", "cpu_bound", "jobs_b"], ["*", nil]])

    described_class.apply(@path, "production", config)
    expect(config.routing_rules).to eq([["*", "default"]])

    File.write(@path, "redis:\n  url: redis://127.0.0.1:6390/3\n")
    expect { described_class.apply(@path, "production", config) }.not_to(change { config.routing_rules })
  end

  it "says which file holds a bad rule" do
    File.write(@path, "routing_rules:\n  - [\"urgency=high|\", urgent]\n")

    expect { described_class.apply(@path, "test", JobQueue::Configuration.new) }
      .to raise_error(JobQueue::Routing::InvalidTerm, /\A#{Regexp.escape(@path)}: routing_rules\[0\] \["urgency=high\|", "urgent"\]: empty term at character 14/)
  end
end
