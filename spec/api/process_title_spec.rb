# frozen_string_literal: true

# Sidekiq 6.4.1 sets its process title every heartbeat to "sidekiq 6.4.1 <tag> [3 of 10 busy]", with
# "stopping" once quiet; operators tell processes apart by it in `ps` and `top`. Ours says "queue".
RSpec.describe "the process title" do
  def title(server)
    File.read("/proc/#{server.pid}/cmdline").split("\0").join(" ")
  end

  it "shows version, tag, busy threads out of the concurrency, and stopping once quiet" do
    server = start_server(app: "basic.rb", args: ["-c", "3", "-g", "billing"])
    wait_until("the title") { title(server) == "queue #{JobQueue::VERSION} billing [0 of 3 busy]" }

    server.signal("TSTP")
    wait_until("the quiet title") { title(server) == "queue #{JobQueue::VERSION} billing [0 of 3 busy] stopping" }
  end
end
