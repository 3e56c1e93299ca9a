# frozen_string_literal: true

require_relative "compat_helper"

# Sidekiq 6.4.1's lifecycle events (sidekiq.rb `on`, util.rb `fire_event`): :startup before the
# processors start (cli.rb), :heartbeat once the process first registered (launcher.rb ❤), :quiet on
# TSTP and :shutdown on TERM (manager.rb), the last two running their blocks last-registered first,
# each event once. Both servers load the same hooks (spec/apps/lifecycle_*.rb) and run the same signals.
RSpec.describe "config.on(:startup | :heartbeat | :quiet | :shutdown)", :compat do
  def run_lifecycle(kind)
    app = kind == :queue ? "lifecycle_queue.rb" : "lifecycle_sidekiq.rb"
    server = ServerProcess.new(kind: kind, app: app, args: ["-c", "2"]).start
    @servers << server
    key = "lifecycle:#{kind}"
    wait_until("#{kind} to fire :heartbeat") { redis.lrange(key, 0, -1).include?("heartbeat-2:registered") }
    server.signal("TSTP")
    wait_until("#{kind} to fire :quiet") { redis.lrange(key, 0, -1).include?("quiet-1:registered") }
    expect(server.stop("TERM").exitstatus).to eq(0)
    redis.lrange(key, 0, -1)
  end

  it "fires each event once, at the same moments and in the same order as Sidekiq 6.4.1" do
    sidekiq = run_lifecycle(:sidekiq)
    ours = run_lifecycle(:queue)

    expect(ours).to eq(sidekiq)
    expect(ours).to eq(%w[
      startup-1 startup-2 heartbeat-1:registered heartbeat-2:registered
      quiet-2:registered quiet-1:registered shutdown-2:registered shutdown-1:registered
    ])
  end
end
