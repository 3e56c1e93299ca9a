# frozen_string_literal: true

require "queue/api"
require_relative "../apps/job_args"

# A job the engine runs itself gets its arguments spread into `perform` without an Array for them
# (up to eight are held inline, job_hash.rs `Args`); more go into an Array. Either way `perform`
# gets what JSON.parse would give it.
RSpec.describe "a job's arguments, as perform gets them" do
  let(:redis) { TestRedis.client }

  it "are the pushed ones, however many and however nested" do
    nested = [[1, [2, [3]]], {"a" => [4, {"b" => nil}]}, "x", 2.5, true, false, nil, -7]
    lists = {
      "none" => [], "one" => ["only"], "eight" => nested, "nine" => nested + [[9]],
      "thirty" => (1..30).map { |i| i.even? ? [i, "s#{i}"] : i }, "array first" => [[], [[]]]
    }
    jids = lists.transform_values { |args| ArgsJob.perform_async(*args) }
    start_server(app: "job_args.rb", args: ["-c", "2"])
    wait_until("every job") { redis.llen("args") == lists.size }
    got = redis.lrange("args", 0, -1).to_h { |line| JSON.parse(line) }
    expect(got).to eq(lists.to_h { |name, args| [jids.fetch(name), args] })
  end
end
