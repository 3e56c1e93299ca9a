# frozen_string_literal: true

require "tmpdir"

# Issue #24, point 2, in a Rails app that keeps the sidekiq gem (a copy of spec/rails_app with
# `gem "sidekiq"` and an initializer): `bundle exec queue` runs its Sidekiq.configure_server block,
# and skips the gem's own Railtie blocks, whose work queue's Railtie does already: a job's
# Rails.logger line reaches the server's log once, with the job's context, not a second time through
# Sidekiq.logger.
RSpec.describe "a Rails app keeping the sidekiq gem, on bundle exec queue" do
  around do |example|
    Dir.mktmpdir("queue-sidekiq-gem-rails-") do |dir|
      @dir = RailsApp.copy(dir)
      File.write(File.join(dir, "Gemfile"), "#{File.read(File.join(dir, "Gemfile"))}gem \"sidekiq\", \"~> 6.4\"\n")
      FileUtils.mkdir_p(File.join(dir, "config", "initializers"))
      File.write(File.join(dir, "config", "initializers", "sidekiq.rb"), <<~RUBY)
        # frozen_string_literal: true

        class StampMiddleware
          def call(_worker, job, _queue)
            Rails.logger.warn("stamped \#{job["jid"]}")
            yield
          end
        end

        Sidekiq.configure_server do |config|
          config.redis = {url: ENV.fetch("QUEUE_REDIS_URL")}
          config.server_middleware { |chain| chain.add(StampMiddleware) }
        end
      RUBY
      File.write(File.join(dir, "app", "workers", "log_worker.rb"), <<~RUBY)
        # frozen_string_literal: true

        class LogWorker
          include Sidekiq::Worker

          def perform
            Rails.logger.warn("hello from \#{jid}")
          end
        end
      RUBY
      example.run
    end
  end

  it "runs the app's block, and logs a job's Rails.logger line once" do
    jid = JobQueue::Client.push("class" => "LogWorker", "args" => [], "queue" => "default")
    server = RailsApp.server(dir: @dir)
    begin
      wait_until("the job's line") { server.output.include?("hello from #{jid}") && server.output.include?("elapsed=") }
      expect(server.stop.exitstatus).to eq(0)
    ensure
      server.ensure_stopped
    end
    output = server.output
    expect(output).to include("Sidekiq.configure_server honoured: server middleware StampMiddleware;")
    expect(output.lines.grep(/stamped #{jid}/).size).to eq(1), output
    expect(output.lines.grep(/hello from #{jid}/)).to contain_exactly(a_string_including("class=LogWorker jid=#{jid} WARN: hello from #{jid}"))
  end
end
