# frozen_string_literal: true

require "json"

# Helpers for the Ruby API specs (spec/api): reading back what a push wrote, and server processes that
# are always stopped after the example (their log is printed when it failed).
module ApiHelpers
  # Jobs of `queue:<name>` in the order a server takes them (the oldest push first).
  def queued_jobs(queue = "default", namespace: "")
    TestRedis.client.lrange("#{namespace}queue:#{queue}", 0, -1).reverse.map { |raw| JSON.parse(raw) }
  end

  # [job, score] pairs of a sorted set (schedule, retry, dead), lowest score first.
  def sorted_set_jobs(key)
    TestRedis.client.zrange(key, 0, -1, with_scores: true).map { |raw, score| [JSON.parse(raw), score] }
  end

  # Every value a list holds, parsed as JSON (what the app files in spec/apps record).
  def recorded(key)
    TestRedis.client.lrange(key, 0, -1).map { |raw| JSON.parse(raw) }
  end

  def start_server(app:, args: [], env: {})
    server = ServerProcess.new(app: app, args: args, env: env).start
    api_servers << server
    server
  end

  # The process hash of the one server registered in `processes`, once it has beaten.
  def registered_process_info
    wait_until("the server to register") do
      identity = TestRedis.client.smembers("processes").first
      info = identity && TestRedis.client.hget(identity, "info")
      info && JSON.parse(info)
    end
  end

  def api_servers
    @api_servers ||= []
  end
end

RSpec.configure do |config|
  config.include ApiHelpers, file_path: %r{spec/api/}
  config.after(file_path: %r{spec/api/}) do |example|
    api_servers.each do |server|
      server.ensure_stopped
      warn "\n--- log of server #{server.pid} (#{example.full_description}):\n#{server.output}" if example.exception
    end
  end
end
