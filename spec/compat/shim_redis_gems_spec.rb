# frozen_string_literal: true

require "tmpdir"

# Issue #24, point 3: the shim's Sidekiq.redis is JobQueue.redis, which needs the redis and
# connection_pool gems. An app whose bundle lacks them hears so when the shim loads (at boot), not
# first from a job's LoadError. The app runs in a bundle of its own with the queue gem only.
RSpec.describe "queue/compat/sidekiq in a bundle without the redis and connection_pool gems" do
  it "warns at boot, naming the gems to add to the Gemfile" do
    Dir.mktmpdir("queue-shim-bundle") do |dir|
      File.write(File.join(dir, "Gemfile"), "source \"https://rubygems.org\"\ngem \"queue\", path: #{ServerProcess::ROOT.inspect}\n")
      File.write(File.join(dir, "app.rb"), <<~RUBY)
        require "queue/compat/sidekiq"
        require "sidekiq"
        Sidekiq.configure_server { |config| config.redis = {url: ENV.fetch("REDIS_URL")} }
      RUBY
      log = File.join(dir, "queue.log")
      env = {"BUNDLE_GEMFILE" => File.join(dir, "Gemfile"), "REDIS_URL" => TestRedis.url, "RUBYOPT" => nil, "RUBYLIB" => nil}
      pid = Process.spawn(env, "bundle", "exec", RbConfig.ruby, File.join(ServerProcess::ROOT, "exe", "queue"), "-r", "./app.rb", "-c", "1",
        chdir: dir, out: log, err: [:child, :out], pgroup: true)
      exited = nil
      begin
        wait_until("queue to start or exit") { File.read(log).include?("started as") || (exited = Process.waitpid2(pid, Process::WNOHANG)) }
        output = File.read(log)
        expect(output).to include("WARN: queue/compat/sidekiq: Sidekiq.redis and Sidekiq.redis_pool need the redis and connection_pool " \
          "gems; not loadable here: redis, connection_pool. Add gem \"redis\" and gem \"connection_pool\" to the Gemfile, or a job " \
          "that calls Sidekiq.redis fails with LoadError (and goes to its retries)")
        expect(output.index("WARN: queue/compat/sidekiq")).to be < output.index("started as")
      ensure
        unless exited
          Process.kill("TERM", pid)
          Process.wait(pid)
        end
      end
    end
  end

  it "says nothing of the kind where the gems can be loaded" do
    out = IO.popen({"RUBYOPT" => nil}, [RbConfig.ruby, "-I", File.join(ServerProcess::ROOT, "lib"), "-e",
      "require 'queue/compat/sidekiq'; puts JobQueue::RedisPool.missing_gems.inspect"], err: [:child, :out], &:read)
    expect(out).to eq("[]\n")
  end
end
