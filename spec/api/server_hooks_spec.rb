# frozen_string_literal: true

# Lowkiq's server hooks in a real server process (spec/apps/api_hooks.rb): on_server_init once before
# the threads start, last_words once when the server stops.
RSpec.describe "server hooks" do
  def hooks = recorded("hooks")

  it "calls on_server_init at start and last_words(nil) when a signal stops the server" do
    server = start_server(app: "api_hooks.rb")
    wait_until("on_server_init") { hooks.any? }
    expect(server.stop.exitstatus).to eq(0)
    expect(hooks).to eq([{"hook" => "on_server_init", "pid" => server.pid}, {"hook" => "last_words", "pid" => server.pid, "error" => nil}])
  end

  it "calls last_words with the error that stopped the server, once" do
    server = start_server(app: "api_hooks.rb", env: {"HOOKS_FAIL_INIT" => "1"})
    status = server.wait
    expect(status.exitstatus).not_to eq(0)
    expect(hooks).to eq([{"hook" => "on_server_init", "pid" => server.pid},
      {"hook" => "last_words", "pid" => server.pid, "error" => "RuntimeError: init failed"}])
  end

  it "refuses a last_words that cannot be called" do
    expect { JobQueue.config.last_words = "bye" }.to raise_error(ArgumentError, /last_words must respond to call/)
  end
end
