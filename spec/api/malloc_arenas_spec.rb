# frozen_string_literal: true

require_relative "../apps/basic"

# A server process limits glibc's malloc arenas (config.malloc_arena_max, 2 by default) before its
# threads allocate: without the limit each processor thread keeps an arena of its own, whose free
# pages grow the process's RSS with the jobs it runs (ARCHITECTURE.md, "Memory").
RSpec.describe "malloc arenas of a server process" do
  let(:redis) { TestRedis.client }

  # The most arenas any of `jobs` jobs saw, run by a -c 10 server started with `env`.
  def arenas_seen(env, jobs: 20)
    server = start_server(app: "malloc_arenas.rb", args: ["-c", "10"], env: env)
    JobQueue::Client.push_bulk("class" => "ArenaCountWorker", "args" => Array.new(jobs) { [] })
    wait_until("#{jobs} arena counts") { redis.llen("arenas") == jobs }
    expect(server.stop.exitstatus).to eq(0)
    redis.lrange("arenas", 0, -1).map(&:to_i).max
  end

  it "keeps 2 by default, and glibc's own many when the setting is off" do
    expect(arenas_seen({})).to be <= 2
    redis.del("arenas")
    expect(arenas_seen({"ARENA_MAX" => "off"})).to be > 2
  end

  it "leaves the limit to MALLOC_ARENA_MAX when the process was started with it" do
    expect(arenas_seen({"MALLOC_ARENA_MAX" => "4"})).to be_between(3, 4)
  end
end
