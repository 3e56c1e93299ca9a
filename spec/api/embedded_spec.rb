# frozen_string_literal: true

require "socket"
require "tmpdir"
require_relative "../compat/shim_helper"

# JobQueue.configure_embed and the shim's Sidekiq.configure_embed, each in a plain Ruby process (no
# CLI, no signals trapped): the configure_server blocks run, `run` starts the threads and returns,
# a job runs in that process, the process hash says `embedded`, and `stop` takes it out of Redis.
# Puma itself: spec/reliability/embedded_puma_spec.rb.
RSpec.describe "embedded mode", :shim do
  let(:redis) { TestRedis.client }

  # Runs the job pushed before `run`, and prints what the process saw on a RESULT line (its log
  # shares the output).
  def embed(setup, push, env: {})
    out = run_ruby(<<~RUBY, requires: ["redis"], env: env)
      r = Redis.new(url: ENV["REDIS_URL"])
      #{setup}
      #{push}
      before = Signal.trap("TERM", "DEFAULT")
      embedded.run
      _, ran = r.blpop("ran", timeout: 30)
      info = JSON.parse(r.hget(embedded.identity, "info")).slice("embedded", "concurrency", "queues")
      again = begin
        embedded.run
      rescue JobQueue::Error => e
        e.message
      end
      state = {"server" => JobQueue.server?, "trap" => Signal.trap("TERM", before).to_s, "again" => again, "running" => embedded.running?}
      results = [JSON.parse(ran), info, state, embedded.stop, r.smembers("processes").size, embedded.running?, embedded.stop]
      puts "RESULT " + JSON.generate(results)
    RUBY
    JSON.parse(out.lines.grep(/\ARESULT /).last.delete_prefix("RESULT "))
  end

  it "JobQueue.configure_embed: concurrency 2 by default, configure_server blocks first, nothing trapped" do
    setup = <<~RUBY
      require "queue"
      JobQueue.configure { |c| c.redis = {url: ENV["REDIS_URL"]} }
      JobQueue.configure_server { |c| c.queues = %w[never]; c.on(:startup) { r.rpush("events", "startup") } }
      class EmbedWorker
        include JobQueue::Worker
        def perform(x) = Redis.new(url: ENV["REDIS_URL"]).rpush("ran", JSON.generate([x, Process.pid]))
      end
      embedded = JobQueue.configure_embed { |c| c.queues = %w[embedded default] }
    RUBY
    ran, info, state, requeued, processes, running, second_stop = embed(setup, 'EmbedWorker.set(queue: "embedded").perform_async("one")')

    expect(ran.first).to eq("one")
    expect(info).to eq("embedded" => true, "concurrency" => 2, "queues" => %w[embedded default])
    expect(state).to eq("server" => false, "trap" => "DEFAULT", # no TERM handler installed by run
      "again" => "this embedded server already runs; call stop before run", "running" => true)
    expect([requeued, processes]).to eq([0, 0])
    expect([running, second_stop]).to eq([false, 0]) # stopped: a second stop has nothing to do
    expect(redis.lrange("events", 0, -1)).to eq(["startup"])
  end

  it "Sidekiq.configure_embed (queue/compat/sidekiq) yields the configuration after the configure_server blocks" do
    setup = <<~RUBY
      require "queue/compat/sidekiq"
      Sidekiq.configure_server { |config| config.redis = {url: ENV["REDIS_URL"]}; config.on(:startup) { r.rpush("events", "sidekiq startup") } }
      class ShimEmbedWorker
        include Sidekiq::Worker
        sidekiq_options queue: "single"
        def perform(x) = Redis.new(url: ENV["REDIS_URL"]).rpush("ran", JSON.generate([x, Process.pid]))
      end
      embedded = Sidekiq.configure_embed { |config| config.concurrency = 1; config.queues = %w[single] }
    RUBY
    ran, info, state, requeued, = embed(setup, 'ShimEmbedWorker.perform_async("shim")')

    expect(ran.first).to eq("shim")
    expect(info).to eq("embedded" => true, "concurrency" => 1, "queues" => %w[single])
    expect(state["trap"]).to eq("DEFAULT")
    expect(requeued).to eq(0)
    expect(redis.lrange("events", 0, -1)).to eq(["sidekiq startup"])
  end

  it "leaves NOTIFY_SOCKET to the host: no READY, STATUS or watchdog ping from an embedded server" do
    Dir.mktmpdir("qe-") do |dir| # short: a socket path has at most 107 bytes
      path = File.join(dir, "notify.sock")
      manager = Socket.new(:UNIX, :DGRAM)
      manager.bind(Socket.pack_sockaddr_un(path))
      setup = <<~RUBY
        require "queue"
        JobQueue.configure { |c| c.redis = {url: ENV["REDIS_URL"]} }
        class NotifyEmbedWorker
          include JobQueue::Worker
          def perform(x) = Redis.new(url: ENV["REDIS_URL"]).rpush("ran", JSON.generate([x, Process.pid]))
        end
        embedded = JobQueue.configure_embed
      RUBY
      ran, info, = embed(setup, 'NotifyEmbedWorker.perform_async("quiet host")', env: {"NOTIFY_SOCKET" => path, "WATCHDOG_USEC" => "100000"})

      expect(ran.first).to eq("quiet host")
      expect(info).to include("embedded" => true, "queues" => %w[default])
      # A unix datagram is in the socket once sent, and the process has exited: nothing was sent.
      expect(manager.recv_nonblock(4096, exception: false)).to eq(:wait_readable)
    ensure
      manager&.close
    end
  end
end
