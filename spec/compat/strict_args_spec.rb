# frozen_string_literal: true

require "stringio"
require_relative "compat_helper"

module StrictArgsSpec
  COMPLEX = [
    [:symbol],
    [{sym_key: 1}],
    [{1 => "integer key"}],
    [Time.at(0).utc],
    [[1, [2, :nested]]],
    [Object.new]
  ].freeze
  NATIVE = [[], [1, "two", 3.5, nil, true, false], [{"a" => [1, {"b" => nil}]}], [2**70]].freeze

  class SidekiqWorker
    include Sidekiq::Worker
    sidekiq_options queue: "strict_sidekiq"
  end

  class OurWorker
    include JobQueue::Worker
    sidekiq_options queue: "strict_ours"
  end
end

# Sidekiq 6.4.1's `Sidekiq.strict_args!(mode = :raise)` (sidekiq.rb) and its check at push
# (job_util.rb `validate`): :raise refuses arguments that do not come back from JSON equal, :warn
# logs and pushes, false pushes. Ours is strict by default; the same calls take the same modes. Each
# example pushes the same arguments through both clients and compares.
RSpec.describe "JobQueue.strict_args!", :compat do
  around do |example|
    sidekiq_logger = Sidekiq.logger
    @sidekiq_log = StringIO.new
    Sidekiq.logger = Logger.new(@sidekiq_log, level: Logger::WARN)
    example.run
  ensure
    Sidekiq.logger = sidekiq_logger
  end

  before do
    @our_log = StringIO.new
    JobQueue.config.logger = Logger.new(@our_log, level: Logger::WARN)
  end

  def outcome
    yield
    :pushed
  rescue ArgumentError
    :argument_error
  end

  def sidekiq_push(args) = outcome { StrictArgsSpec::SidekiqWorker.perform_async(*args) }

  def our_push(args) = outcome { StrictArgsSpec::OurWorker.perform_async(*args) }

  it "is :raise by default: the arguments Sidekiq's strict_args! refuses, ours refuses, and the rest both push" do
    Sidekiq.strict_args!
    (StrictArgsSpec::COMPLEX + StrictArgsSpec::NATIVE).each do |args|
      expect(our_push(args)).to eq(sidekiq_push(args)), "args #{args.inspect}"
    end
    expect(redis.llen("queue:strict_ours")).to eq(StrictArgsSpec::NATIVE.size)
    expect(redis.llen("queue:strict_sidekiq")).to eq(StrictArgsSpec::NATIVE.size)
    expect(JobQueue.config.strict_args).to eq(:raise)
  end

  it "names the offending argument in its ArgumentError (Sidekiq names only the class)" do
    expect { StrictArgsSpec::OurWorker.perform_async(1, {"ids" => [2, :three]}) }
      .to raise_error(ArgumentError, /\AStrictArgsSpec::OurWorker job argument args\[1\]\["ids"\]\[1\] is a Symbol \(:three\)/)
  end

  it "with :warn, logs a warning per complex push and pushes the JSON form, as Sidekiq" do
    Sidekiq.strict_args!(:warn)
    JobQueue.strict_args!(:warn)
    StrictArgsSpec::COMPLEX.each do |args|
      expect([our_push(args), sidekiq_push(args)]).to eq(%i[pushed pushed])
    end
    ours = redis.lrange("queue:strict_ours", 0, -1).map { |j| JSON.parse(j)["args"] }
    theirs = redis.lrange("queue:strict_sidekiq", 0, -1).map { |j| JSON.parse(j)["args"] }
    expect(ours).to eq(theirs) # the same Object in both: its to_s
    expect(@our_log.string.scan(/WARN .*does not serialize to JSON safely/).size).to eq(StrictArgsSpec::COMPLEX.size)
    expect(@sidekiq_log.string.scan(/do not serialize to JSON safely/).size).to eq(StrictArgsSpec::COMPLEX.size)
  end

  it "with false, pushes complex arguments silently, as Sidekiq" do
    Sidekiq.strict_args!(false)
    JobQueue.strict_args!(false)
    StrictArgsSpec::COMPLEX.each { |args| expect([our_push(args), sidekiq_push(args)]).to eq(%i[pushed pushed]) }
    expect(@our_log.string).to be_empty
    expect(@sidekiq_log.string).to be_empty
  end

  it "refuses a mode Sidekiq does not have" do
    expect { JobQueue.strict_args!(:loud) }.to raise_error(ArgumentError, "strict_args must be one of [:raise, :warn, false], got :loud")
  end

  # JSON cannot hold a binary String at all: Sidekiq 6.4.1 lets JSON::GeneratorError out of the push
  # (whatever the mode); ours raises ArgumentError naming the argument, in every mode.
  it "raises ArgumentError naming a binary (non-UTF-8) String argument, where Sidekiq raises JSON::GeneratorError" do
    binary = "\xFF\xD8\xFF".b
    [:raise, :warn, false].each do |mode|
      Sidekiq.strict_args!(mode)
      JobQueue.strict_args!(mode)
      expect { StrictArgsSpec::SidekiqWorker.perform_async("ok", [binary]) }.to raise_error(JSON::GeneratorError)
      expect { StrictArgsSpec::OurWorker.perform_async("ok", [binary]) }
        .to raise_error(ArgumentError, /job argument args\[1\]\[0\] is a String that is not valid UTF-8 \(ASCII-8BIT\)/)
    end
    expect(StrictArgsSpec::OurWorker.perform_async("ascii only".b)).to match(/\A\h{24}\z/)
  end
end
