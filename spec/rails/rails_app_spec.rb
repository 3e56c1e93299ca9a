# frozen_string_literal: true

# The whole path in a real Rails 6.1 app (spec/rails_app): `bin/rails runner` creates its table and
# enqueues a job of each kind, `bundle exec queue` in the app runs them, and their rows are checked;
# then the app's own RSpec specs run.
RSpec.describe "A Rails 6.1 app with queue" do
  let(:kinds) { %w[plain idempotent ordered active_job flaky doomed] }

  it "runs plain, idempotent, ordered and ActiveJob jobs enqueued by bin/rails runner" do
    output, status = RailsApp.run(RbConfig.ruby, "bin/rails", "runner", "script/enqueue.rb")
    expect(status).to be_success, output
    expect(output).to include("enqueued; scheduled: 1") # RecordJob.set(wait: 1)

    # 2 threads share 1 connection: a job that kept it would starve the other thread into
    # ActiveRecord::ConnectionTimeoutError, or show on that thread's next job (held_connection); the
    # reloader around each job gives it back.
    RailsApp.server("-c", "2", env: {"DATABASE_POOL" => "1"}).watch do |server|
      wait_until("every job's rows") { RailsApp.entries.size >= 9 }
      # 7 job runs: plain, idempotent (its duplicate was dropped), RecordJob twice, FlakyJob's two
      # attempts (retry_on enqueued the second) and DoomedJob (discard_on: not a failure).
      wait_until("7 jobs acknowledged") { JobQueue.stats["processed"] >= 7 }
      by_kind = RailsApp.entries.group_by(&:first).transform_values { |r| r.map { |_, key, value, _| [key, value] } }
      by_kind["active_job"]&.sort! # a2's second may be up before the server starts: any order then
      expect(by_kind).to eq(
        "plain" => [["p1", 1]],
        "idempotent" => [["i1", 2]],
        "ordered" => [["o1", 1], ["o1", 2]],
        "active_job" => [["a1", 3], ["a2", 4]],
        "flaky" => [["f1", 1], ["f1", 2]],
        "doomed" => [["d1", 1]]
      )
      expect(RailsApp.entries.map(&:last)).to all(eq(0)), "a job started holding a database connection: #{RailsApp.entries}"
      expect(JobQueue.stats).to include("processed" => 7, "failed" => 0, "retry_size" => 0, "dead_size" => 0, "scheduled_size" => 0)
      expect(server.output).to include("database pool (1) is smaller than concurrency (2)")
      # Rails.logger (a file here) also reaches the server's log, in the job's context.
      expect(server.output).to match(/class=DoomedJob jid=\h+ .*ERROR: Discarded DoomedJob due to a DoomedJob::Gone/)
      expect(server.stop.exitstatus).to eq(0)
    end
  end

  it "wraps an embedded server's jobs in the app's reloader (JobQueue.configure_embed in a Rails process)" do
    output, status = RailsApp.run(RbConfig.ruby, "bin/rails", "runner", "script/embedded.rb", env: {"DATABASE_POOL" => "1"})
    expect(status).to be_success, output
    expect(output).to include("embedded stopped, 0 requeued")
    rows = RailsApp.entries.select { |kind, *| kind == "plain" }
    expect(rows.map { |_, key, value, _| [key, value] }).to match_array([["e0", 0], ["e1", 1], ["e2", 2], ["e3", 3]])
    expect(rows.map(&:last)).to all(eq(0)), "a job started holding a database connection: #{rows}"
  end

  it "passes its own specs (the shared example 'an idempotent worker', the test modes)" do
    output, status = RailsApp.run("bundle", "exec", "rspec")
    expect(status).to be_success, output
    expect(output).to include("6 examples, 0 failures")
  end
end
