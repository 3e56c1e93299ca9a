# frozen_string_literal: true

module ApiSpec
  class ArgsWorker
    include JobQueue::Worker
  end
end

RSpec.describe "job arguments" do
  after { expect(TestRedis.client.keys("*")).to be_empty, "a refused push must write nothing" }

  {
    "a Symbol" => [[:active], /args\[0\] is a Symbol/],
    "a Time" => [[1, Time.at(0)], /args\[1\] is a Time/],
    "an arbitrary Object" => [[Object.new], /args\[0\] is a Object/],
    "a Symbol hash key" => [[{user: 1}], /args\[0\] key :user is a Symbol key/],
    "an Integer hash key" => [[{1 => "one"}], /args\[0\] key 1 is a Integer key/],
    "NaN" => [[Float::NAN], /args\[0\] is a non-finite Float/],
    "Infinity" => [[[1.0, -Float::INFINITY]], /args\[0\]\[1\] is a non-finite Float/],
    "a nested Symbol" => [["ok", {"a" => [1, {"b" => :deep}]}], /args\[1\]\["a"\]\[1\]\["b"\] is a Symbol/],
    "a nested Symbol key" => [[[{"a" => {b: 1}}]], /args\[0\]\[0\]\["a"\] key :b/],
    "a Range" => [[1..2], /args\[0\] is a Range/]
  }.each do |what, (args, message)|
    it "refuses #{what} at perform_async, naming the argument" do
      expect { ApiSpec::ArgsWorker.perform_async(*args) }.to raise_error(ArgumentError, message)
    end
  end

  it "names the worker in the message" do
    expect { ApiSpec::ArgsWorker.perform_async(:x) }.to raise_error(ArgumentError, /ApiSpec::ArgsWorker/)
  end

  it "refuses at perform_in, set, perform_bulk and Client.push too" do
    expect { ApiSpec::ArgsWorker.perform_in(60, :x) }.to raise_error(ArgumentError, /args\[0\]/)
    expect { ApiSpec::ArgsWorker.set(queue: "q").perform_async(:x) }.to raise_error(ArgumentError, /args\[0\]/)
    expect { ApiSpec::ArgsWorker.perform_bulk([[1], [Time.now]]) }.to raise_error(ArgumentError, /args\[0\] is a Time/)
    expect { JobQueue::Client.push("class" => "Remote", "args" => [{"k" => Float::NAN}]) }.to raise_error(ArgumentError, /args\[0\]\["k"\]/)
  end

  describe "that are JSON-native" do
    after { TestRedis.flush }

    it "are accepted and written as given" do
      args = ["s", 1, -2**70, 1.25, true, false, nil, [1, [2]], {"a" => {"b" => [nil]}}, {}]
      ApiSpec::ArgsWorker.perform_async(*args)
      expect(queued_jobs.first["args"]).to eq(args)
    end
  end
end
