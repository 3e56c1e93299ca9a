# frozen_string_literal: true

require_relative "compat_helper"
require_relative "../apps/compat_sidekiq_worker"

# README "Moving from Sidekiq": an app's Sidekiq::Worker classes run unchanged on our server when the
# app requires sidekiq (its client and Sidekiq::Worker) but runs `queue` instead of `sidekiq`.
RSpec.describe "an unchanged Sidekiq 6.4.1 Sidekiq::Worker class, run by our server", :compat do
  it "runs its perform_async jobs, honours its sidekiq_options queue and retry, and gives it a logger" do
    ok = UnchangedSidekiqWorker.perform_async("as is", 2**70)
    failing = UnchangedSidekiqWorker.perform_async("fail")

    server = ServerProcess.new(app: "compat_sidekiq_worker.rb", args: ["-q", "unchanged"]).start
    run = wait_until("the job to run") { redis.lrange(CompatRecord::KEY, 0, -1).map { |r| JSON.parse(r) }.find { |r| r["jid"] == ok } }
    expect(run).to include("runner" => "unchanged", "class" => "UnchangedSidekiqWorker", "args" => ["as is", 2**70])
    expect(run["logger"]).to match(/Logger/)
    retried = wait_until("the failure in the retry set") { Sidekiq::RetrySet.new.find_job(failing) }
    expect(retried.item).to include("retry" => 2, "queue" => "unchanged", "error_class" => "ArgumentError", "error_message" => "failing as asked")
    expect(server.stop.exitstatus).to eq(0)
  ensure
    server&.ensure_stopped
  end
end
