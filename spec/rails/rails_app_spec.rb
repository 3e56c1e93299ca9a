# frozen_string_literal: true

# The whole path in a real Rails 6.1 app (spec/rails_app): `bin/rails runner` creates its table and
# enqueues a job of each kind, `bundle exec queue` in the app runs them, and their rows are checked;
# then the app's own RSpec specs run.
RSpec.describe "A Rails 6.1 app with queue" do
  let(:kinds) { %w[plain idempotent ordered active_job flaky doomed] }

  it "runs plain, idempotent, ordered and ActiveJob jobs enqueued by bin/rails runner" do
    output, status = RailsApp.run(RbConfig.ruby, "bin/rails", "runner", "script/enqueue.rb")
    expect(status).to be_success, output
    expect(output).to include("enqueued")

    server = RailsApp.server("-c", "6", env: {"DATABASE_POOL" => "5"})
    begin
      wait_until("every job's rows") { RailsApp.entries.size >= 9 }
      # 7 job runs: plain, idempotent (its duplicate was dropped), RecordJob twice, FlakyJob's two
      # attempts (retry_on enqueued the second) and DoomedJob (discard_on: not a failure).
      wait_until("7 jobs acknowledged") { JobQueue.stats["processed"] >= 7 }
      rows = RailsApp.entries
      expect(rows.group_by(&:first).transform_values { |r| r.map { |_, key, value| [key, value] } }).to eq(
        "plain" => [["p1", 1]],
        "idempotent" => [["i1", 2]],
        "ordered" => [["o1", 1], ["o1", 2]],
        "active_job" => [["a1", 3], ["a2", 4]], # a2 was scheduled a second later
        "flaky" => [["f1", 1], ["f1", 2]],
        "doomed" => [["d1", 1]]
      )
      expect(JobQueue.stats).to include("processed" => 7, "failed" => 0, "retry_size" => 0, "dead_size" => 0, "scheduled_size" => 0)
      expect(server.output).to include("database pool (5) is smaller than concurrency (6)")
      expect(server.stop.exitstatus).to eq(0)
    rescue RSpec::Expectations::ExpectationNotMetError
      warn("\n--- #{server.log}\n#{server.output}")
      raise
    ensure
      server.ensure_stopped
    end
  end

  it "passes its own specs (the shared example 'an idempotent worker', the test modes)" do
    output, status = RailsApp.run("bundle", "exec", "rspec")
    expect(status).to be_success, output
    expect(output).to include("6 examples, 0 failures")
  end
end
