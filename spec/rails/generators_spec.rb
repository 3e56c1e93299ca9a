# frozen_string_literal: true

require "tmpdir"

# `bin/rails g queue:install` and `bin/rails g queue:worker` in a copy of spec/rails_app (the committed
# app stays as it is): the files they write, a re-run, a bad option; then RuboCop on the generated
# Ruby, the copy's own `bundle exec rspec` with the generated specs, and `bundle exec queue` running
# generated workers' jobs from the generated config/queue.yml.
RSpec.describe "Rails generators queue:install and queue:worker" do
  before(:all) do
    @dir = RailsApp.copy(Dir.mktmpdir("queue-generators-"))
    FileUtils.rm_f(File.join(@dir, "config", "queue.yml")) # the app's own; queue:install writes one
  end

  after(:all) { FileUtils.rm_rf(@dir) if @dir }

  # The generated config/queue.yml reads REDIS_URL.
  def rails(*args)
    RailsApp.run(RbConfig.ruby, "bin/rails", *args, dir: @dir, env: {"REDIS_URL" => TestRedis.url})
  end

  def file(path)
    File.read(File.join(@dir, path))
  end

  GENERATED = %w[
    app/workers/cleanup_worker.rb spec/workers/cleanup_worker_spec.rb
    app/workers/admin/prune_worker.rb spec/workers/admin/prune_worker_spec.rb
    app/workers/sync/order_worker.rb spec/workers/sync/order_worker_spec.rb
    config/initializers/queue.rb
  ].freeze

  it "writes the config, the initializer and workers of each flavour, whose specs pass and whose jobs run" do
    output, status = rails("g", "queue:install")
    expect(status).to be_success, output
    expect(output).to match(%r{create\s+config/queue\.yml}).and match(%r{create\s+config/initializers/queue\.rb})
    expect(file("config/queue.yml")).to include(%(url: <%= ENV.fetch('REDIS_URL', 'redis://localhost:6379/0') %>), "production:", "pool:")
    expect(file("config/initializers/queue.rb")).to include("JobQueue.configure_server do |config|", "JobQueue.configure_client do |config|")

    output, status = rails("g", "queue:install") # again: nothing changes, nothing is asked
    expect(status).to be_success, output
    expect(output).to match(%r{identical\s+config/queue\.yml}).and match(%r{identical\s+config/initializers/queue\.rb})

    [%w[Cleanup], %w[Admin::Prune --idempotent], %w[Sync::Order --ordered --queue orders_v1]].each do |args|
      output, status = rails("g", "queue:worker", *args)
      expect(status).to be_success, output
    end
    expect(file("app/workers/cleanup_worker.rb")).to include("class CleanupWorker\n  include JobQueue::Worker\n")
    expect(file("app/workers/admin/prune_worker.rb")).to include("class Admin::PruneWorker\n  include JobQueue::ApplicationWorker\n", "  idempotent!\n")
    expect(file("spec/workers/admin/prune_worker_spec.rb")).to include("it_behaves_like 'an idempotent worker' do", "eq('admin_prune')")
    expect(file("app/workers/sync/order_worker.rb")).to include("module Sync::OrderWorker\n  extend JobQueue::OrderedWorker\n", "self.queue_name = 'orders_v1'")
    expect(file("spec/workers/sync/order_worker_spec.rb")).to include("it_behaves_like 'an ordered worker' do", "JobQueue::Testing.fake!")

    output, status = rails("g", "queue:worker", "Both", "--idempotent", "--ordered")
    expect(status.exitstatus).to eq(1), output
    expect(output).to include("--idempotent and --ordered do not go together")
    expect(Dir.glob(File.join(@dir, "{app,spec}", "workers", "both_worker*"))).to be_empty

    # RuboCop's defaults and queue's cop, but compact `class Admin::PruneWorker`, as Rails' own
    # generators write namespaced classes (`module Admin` would break where Admin is a class).
    config = File.join(@dir, ".rubocop-generated.yml")
    File.write(config, "require:\n  - queue/rubocop\nAllCops:\n  NewCops: enable\n  SuggestExtensions: false\nStyle/ClassAndModuleChildren:\n  Enabled: false\n")
    output, status = Open3.capture2e({"RUBYLIB" => File.join(ServerProcess::ROOT, "lib"), "BUNDLE_GEMFILE" => nil, "RUBYOPT" => nil},
      "rubocop", "--cache", "false", "-c", config, *GENERATED, chdir: @dir)
    expect(status).to be_success, output
    expect(output).to include("#{GENERATED.size} files inspected, no offenses detected")

    # 6 examples of the app's own, 12 generated: plain 2, idempotent 4, ordered 6.
    output, status = RailsApp.run("bundle", "exec", "rspec", dir: @dir)
    expect(status).to be_success, output
    expect(output).to include("18 examples, 0 failures")

    output, status = rails("runner", "CleanupWorker.perform_async('c', 1); Admin::PruneWorker.perform_async('p'); " \
      "Sync::OrderWorker.perform_async([{id: 7, payload: 'a'}, {id: 7, payload: 'b'}])")
    expect(status).to be_success, output

    ordered = ordered_stand_in("orders_v1")
    expect(JobQueue::Ordered.stats([ordered])["total"]).to include("length" => 1, "morgue_length" => 0)

    # No :queues: in the generated file: "default" plus the ApplicationWorker's own "admin_prune".
    begin
      RailsApp.server("-c", "2", dir: @dir, env: {"REDIS_URL" => TestRedis.url}).watch do |server|
        wait_until("the generated workers' jobs") do
          server.output.scan(/class=(CleanupWorker|Admin::PruneWorker) jid=\h+ elapsed=\S+ INFO: done/).uniq.size == 2 &&
            JobQueue::Ordered.stats([ordered]).dig("total", "length").zero?
        end
        expect(server.output).to match(/started as .* on .*admin_prune/)
        expect(JobQueue::Ordered.stats([ordered])["total"]).to include("length" => 0, "morgue_length" => 0)
        expect(JobQueue.stats).to include("processed" => 2, "failed" => 0, "retry_size" => 0, "dead_size" => 0)
        expect(server.stop.exitstatus).to eq(0)
      end
    ensure
      JobQueue::OrderedWorker.forget(ordered)
    end
  end

  # Sync::OrderWorker's queue as this process sees it (the worker itself lives in the app).
  def ordered_stand_in(queue_name)
    Module.new.tap do |worker|
      worker.extend(JobQueue::OrderedWorker)
      worker.queue_name = queue_name
    end
  end
end
