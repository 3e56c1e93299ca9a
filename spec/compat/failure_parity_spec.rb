# frozen_string_literal: true

require "securerandom"
require_relative "compat_helper"

# The same failing jobs, byte for byte, run first by a real Sidekiq 6.4.1 process and then by ours:
# what each files in the retry and dead sets must match field for field, in the same order, apart
# from the time of the failure.
RSpec.describe "failures filed by our server and by Sidekiq 6.4.1, side by side", :compat do
  let(:now) { Time.now.to_f }
  let(:jobs) do
    {
      # A client that leaves "retry" out (Sidekiq's own always writes it): the worker's option applies.
      "doomed, no retry field" => {"class" => "CompatDoomed", "args" => ["a", 2**70]},
      "doomed, retry: 0 and fields of the app" => {
        "class" => "CompatDoomed", "args" => [{"n" => [1.5, nil]}], "retry" => 0,
        "tags" => ["t"], "custom_field" => {"keep" => ["✓", 2**70]}
      },
      "flaky, no retry field" => {"class" => "CompatFlaky", "args" => CompatHelpers::TRICKY_ARGS},
      "flaky, retry: 3 and a retry_queue" => {"class" => "CompatFlaky", "args" => [], "retry" => 3, "retry_queue" => "later"}
    }.transform_values do |fields|
      {"queue" => "default", "jid" => SecureRandom.hex(12), "created_at" => now, "enqueued_at" => now}.merge(fields)
    end
  end
  let(:raw) { jobs.transform_values { |job| JSON.generate(job) } }

  # Pushes every job as the same bytes, runs the server the block starts until all have failed, and
  # returns what the retry and dead sets hold, as job name => [set, entry]; then empties both sets.
  def failures_under
    raw.each_value { |json| redis.lpush("queue:default", json) }
    server = yield
    wait_until("all #{raw.size} jobs to fail") { Sidekiq::RetrySet.new.size + Sidekiq::DeadSet.new.size == raw.size }
    expect(server.stop.exitstatus).to eq(0)
    filed = {}
    [Sidekiq::RetrySet, Sidekiq::DeadSet].each do |set|
      set.new.each { |entry| filed[jobs.find { |_, job| job["jid"] == entry.jid }&.first] = [set, entry] }
      set.new.clear
    end
    filed
  end

  it "files each failure in the same set with the same fields" do
    theirs = failures_under { sidekiq_server }
    ours = failures_under { our_server }
    expect(ours.keys).to match_array(jobs.keys)
    expect(theirs.keys).to match_array(jobs.keys)

    jobs.each_key do |name|
      their_set, their_entry = theirs.fetch(name)
      our_set, our_entry = ours.fetch(name)
      expect([name, our_set]).to eq([name, their_set])
      expect([name, our_entry.item.keys]).to eq([name, their_entry.item.keys])
      expect([name, our_entry.item.except("failed_at")]).to eq([name, their_entry.item.except("failed_at")])
      expect(our_entry["failed_at"]).to be_a(Float)
      # From the failure: Sidekiq's first retry delay (15 + rand(10) seconds), or the time of death.
      delay = our_set == Sidekiq::RetrySet ? [15, 24.001] : [-0.001, 0.001]
      expect(our_entry.score - our_entry["failed_at"]).to be_between(*delay)
    end
    expect(ours.dig("doomed, no retry field", 1)["retry"]).to eq(0)
  end
end
