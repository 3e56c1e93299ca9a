# frozen_string_literal: true

# App for spec/api/server_hooks_spec.rb: records when the server hooks run. With HOOKS_FAIL_INIT set,
# on_server_init raises, which stops the server.
require_relative "basic"

module HooksApp
  def self.record(hook, extra = {})
    Record.redis.rpush("hooks", JSON.generate({"hook" => hook, "pid" => Process.pid}.merge(extra)))
  end
end

JobQueue.configure_server do |config|
  config.on_server_init = lambda do
    HooksApp.record("on_server_init")
    raise "init failed" if ENV["HOOKS_FAIL_INIT"]
  end
  config.last_words = ->(error) { HooksApp.record("last_words", "error" => error && "#{error.class}: #{error.message}") }
end
