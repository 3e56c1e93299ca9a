# frozen_string_literal: true

require "queue/api"

# `bundle exec queue cluster` in the real Rails 6.1 app (spec/rails_app): the parent boots Rails once,
# each forked child runs jobs that write through ActiveRecord, and each registers with the app's
# directory name and its index as its tag.
RSpec.describe "queue cluster in a Rails 6.1 app" do
  it "runs jobs writing through ActiveRecord in two forked children" do
    output, status = RailsApp.run(RbConfig.ruby, "bin/rails", "runner",
      'ActiveRecord::Schema.verbose = false; load Rails.root.join("db", "schema.rb"); 20.times { |i| PlainWorker.perform_async("c#{i}", i) }')
    expect(status).to be_success, output

    RailsApp.server("cluster", "-c", "2", "-n", "2", "default").watch do |server|
      wait_until("20 rows", timeout: 60) { RailsApp.entries.size >= 20 }
      expect(RailsApp.entries.map { |kind, key, value, _| [kind, key, value] }).to match_array(Array.new(20) { |i| ["plain", "c#{i}", i] })
      processes = JobQueue::ProcessSet.new.to_a.sort_by(&:tag)
      expect(processes.map(&:tag)).to eq(%w[rails_app-0 rails_app-1])
      expect(processes.map(&:queues)).to all(eq(["default"]))
      expect(server.stop.exitstatus).to eq(0)
    end
  end
end
