# frozen_string_literal: true

$LOAD_PATH.unshift(File.expand_path("../lib", __dir__))
require "queue"
require "redis" # test-side inspection only; the gem itself never talks to Redis from Ruby

Dir[File.join(__dir__, "support", "*.rb")].sort.each { |f| require f }

RSpec.configure do |config|
  config.disable_monkey_patching!
  config.expect_with(:rspec) { |c| c.syntax = :expect }
  config.order = :random
  Kernel.srand config.seed

  # One private redis-server (unix socket in a temp dir) for the whole run; flushed before each example.
  config.before(:suite) { TestRedis.start }
  config.after(:suite) { TestRedis.stop }
  config.before do
    TestRedis.flush
    JobQueue.instance_variable_set(:@config, nil)
    JobQueue.configure { |c| c.redis = {url: TestRedis.url} }
    JobQueue.config.logger.level = Logger::WARN
  end
end
