# frozen_string_literal: true

require_relative "apps/basic"

RSpec.describe "a job through our server" do
  let(:server) { ServerProcess.new(app: "basic.rb", args: ["-c", "2"]) }

  after { server.ensure_stopped }

  it "runs a pushed job with its arguments" do
    EchoWorker.perform_async("héllo", 1.5, {"a" => [nil, true]})
    server.start
    ran = wait_until("the job to run") { TestRedis.client.lrange("ran:echo", 0, -1).first }
    expect(JSON.parse(ran)["args"]).to eq(["héllo", 1.5, {"a" => [nil, true]}])
    expect(server.stop.exitstatus).to eq(0)
  end
end
