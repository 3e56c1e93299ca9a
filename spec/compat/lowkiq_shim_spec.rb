# frozen_string_literal: true

require_relative "shim_helper"

# README "Moving from Lowkiq": an app written against Lowkiq that dropped the lowkiq gem runs unchanged
# with `require "queue/compat/lowkiq"` (spec/apps/lowkiq_shim_app.rb).
RSpec.describe "queue/compat/lowkiq: a Lowkiq app without the lowkiq gem", :shim do
  let(:redis) { TestRedis.client }

  def records(list) = redis.lrange(list, 0, -1).map { |r| Marshal.load(r) } # rubocop:disable Security/MarshalLoad -- the app's own records

  it "pushes Marshal payloads through its client middleware, and our server runs them merged and ordered, with its server middleware, init hook and retries" do
    run_ruby(<<~RUBY, requires: [app_path("lowkiq_shim_app.rb")])
      OrderSyncWorker.perform_async [
        { payload: { id: 7, v: 2 }, score: 2 },
        { payload: { id: 7, v: 1 }, score: 1 },
        { payload: { id: 7, v: 2 }, score: 5 },
        { payload: { id: 8, v: 1, at: Time.at(0) } },
      ]
      DoomedWorker.perform_async [{ id: "x", payload: :first, score: 1 }, { id: "x", payload: :second, score: 2 }]
    RUBY
    expect(records("lowkiq:client")).to eq([{worker: "OrderSyncWorker", size: 4}, {worker: "DoomedWorker", size: 2}])
    expect(redis.zrange("lowkiq:A:v1:OrderSyncWorker:payloads:7", 0, -1, with_scores: true).map { |b, s| [Marshal.load(b), s] }) # rubocop:disable Security/MarshalLoad
      .to eq([[{id: 7, v: 1}, 1.0], [{id: 7, v: 2}, 2.0]]) # merged: the same payload keeps its lowest score

    server = ServerProcess.new(app: "lowkiq_shim_app.rb", args: ["-q", "default"]).start
    ran = wait_until("ids 7 and 8 to run") { (r = records("lowkiq:ran")).size >= 2 && r }
    expect(ran).to contain_exactly({id: "7", payloads: [{id: 7, v: 1}, {id: 7, v: 2}]}, {id: "8", payloads: [{id: 8, v: 1, at: Time.at(0)}]})
    exhausted = wait_until("the oldest doomed payload in the morgue") { records("lowkiq:exhausted").first }
    expect(exhausted).to match([{id: "x", payloads: [[:first, 1.0]], error: "doomed x (formatted)"}]) # Lowkiq.format_error
    expect(records("lowkiq:doomed").size).to be >= 2 # the first run and its retry
    expect(records("lowkiq:middleware").map { |m| m[:worker] }).to include("OrderSyncWorker", "DoomedWorker")
    expect(records("lowkiq:init").size).to eq(1)
    expect(server.output).to include("2 threads") # Lowkiq.threads_per_node = 2
    expect(server.stop.exitstatus).to eq(0)
  ensure
    server&.ensure_stopped
  end
end
