# frozen_string_literal: true

require "open3"

# `queue ordered morgue WORKER`, run as a user runs it (exe/queue in its own process): each entry one
# JSON line, its payloads JSON values, not Ruby `inspect` strings.
RSpec.describe "queue ordered morgue" do
  let(:redis) { TestRedis.client }
  # The app's workers (spec/apps/logs.rb) as this process needs them to write their morgues.
  let(:json_worker) { ordered_worker("LogsOrderedWorker") }
  let(:marshal_worker) { ordered_worker("LogsMarshalWorker") { payload_format :marshal } }

  # A morgue entry as Lowkiq writes one, its payloads in the worker's format.
  def bury(worker, id, payloads)
    redis.zadd(lowkiq_key(worker, "morgue:all_ids_lex"), 0, id)
    redis.zadd(lowkiq_key(worker, "morgue:all_ids_scored_by_updated_at"), 100, id)
    payloads.each_with_index { |payload, i| redis.zadd(lowkiq_key(worker, "morgue:payloads:#{id}"), i + 1, worker.payload_codec.dump(payload, worker)) }
    redis.hset(lowkiq_key(worker, "morgue:errors"), id, "ArgumentError: doomed")
  end

  def morgue(worker)
    out, err, status = Open3.capture3({"REDIS_URL" => TestRedis.url}, RbConfig.ruby, File.join(ServerProcess::ROOT, "exe", "queue"),
      "ordered", "morgue", worker.name, "-r", File.join(ServerProcess::APPS, "logs.rb"))
    expect([status.exitstatus, err]).to eq([0, ""])
    out.lines.map { |line| JSON.parse(line) }
  end

  it "prints JSON payloads as JSON values" do
    bury(json_worker, "a", [{"user" => 1, "tags" => ["x"]}, "text", 2.5])

    expect(morgue(json_worker)).to eq([
      {"id" => "a", "updated_at" => 100.0, "error" => "ArgumentError: doomed", "payloads" => [[{"user" => 1, "tags" => ["x"]}, 1.0], ["text", 2.0], [2.5, 3.0]]}
    ])
  end

  it "prints Marshal payloads as JSON when JSON can hold them, else labelled with their inspect string" do
    stub_const("LogsPoint", Struct.new(:x, :y))
    bury(marshal_worker, "m", [{user_id: 1, "name" => "ann"}, LogsPoint.new(1, 2), :sym, "\xff".b])

    entry, *others = morgue(marshal_worker)
    expect(others).to be_empty
    payloads = entry.fetch("payloads")
    expect(payloads).to eq([
      [{"user_id" => 1, "name" => "ann"}, 1.0],
      [{"$ruby" => "#<struct LogsPoint x=1, y=2>"}, 2.0],
      [{"$ruby" => ":sym"}, 3.0],
      [{"$ruby" => "\"\\xFF\""}, 4.0]
    ])
  end
end
