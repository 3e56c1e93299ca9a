# frozen_string_literal: true

# Loaded by every spec in spec/compat: the real Sidekiq 6.4.1 (its client and its API, as an app or
# its dashboard would use them) next to our gem, both on the suite's private redis-server.
require "sidekiq"
require "sidekiq/api"
require_relative "../apps/compat_queue"

# Sidekiq at its best: no deprecation noise from the redis gem, and (in these specs only, see below)
# job arguments checked the strict way, JSON-native only, as Sidekiq 7 requires.
Redis.silence_deprecations = true if Redis.respond_to?(:silence_deprecations=)
Sidekiq.logger.level = Logger::WARN

module CompatHelpers
  # Arguments that must arrive exactly as pushed: unicode and escapes, floats that JSON could blur,
  # integers beyond 64 bits, nil, booleans, and nested hashes and arrays.
  TRICKY_ARGS = [
    "héllo wörld ✓ — 日本語 🎉",
    "quote \" backslash \\ slash / newline \n tab \t nul \u0000 unit-sep \u001f del \u007f ls \u2028",
    "",
    1.5, 0.1, 0.1 + 0.2, -0.0, 1.0, 1.0e-7, 6.02214076e+23, 1.0e+300, -2.5e-300,
    2**70, -(2**70), 10**40 + 1, 2**64, 2**63 - 1, -(2**63), 0, -1,
    nil, true, false,
    {"nested" => {"list" => [1, [2.5, [nil, "✓"]], {"deep" => {"é" => [true, false]}}], "empty" => {}, "none" => nil},
     "big" => 2**70, "" => []},
    [[], [nil], ["a", 1, 1.25, {"k" => [2**65, -0.5]}]]
  ].freeze

  def self.configure_sidekiq_client
    return if @socket == TestRedis.socket

    # Sidekiq 6.4.1 hands these options to Redis.new: a unix socket is `path:`.
    Sidekiq.configure_client { |config| config.redis = {path: TestRedis.socket} }
    @socket = TestRedis.socket
  end

  def redis
    TestRedis.client
  end

  # Records of the jobs the servers ran, oldest first.
  def ran
    redis.lrange(CompatRecord::KEY, 0, -1).map { |r| JSON.parse(r) }
  end

  def wait_for_runs(count, description = "#{count} job(s) to run")
    wait_until(description) { (records = ran).size >= count && records }
  end

  def ran_jid(jid)
    ran.find { |r| r["jid"] == jid }
  end

  # The job ran with exactly these arguments: equal as JSON, and equal as Ruby objects down to each
  # value's class, each string's bytes and encoding, and each float's digits.
  def expect_same_args(record, args)
    expect(record["args"]).to eq(JSON.parse(JSON.generate(args)))
    expect(record["inspect"]).to eq(args.inspect)
    expect(record["marshal"]).to eq([Marshal.dump(distinct_copy(args))].pack("m0"))
  end

  # A copy that shares no object with `args` or within itself, as a JSON parser builds it (Marshal
  # writes an object it has already written as a back reference).
  def distinct_copy(value)
    case value
    when Array then value.map { |v| distinct_copy(v) }
    when Hash then value.to_h { |k, v| [k.dup, distinct_copy(v)] }
    when String then value.dup
    else value
    end
  end

  def our_server(args: ["-c", "2"], env: {})
    @servers << ServerProcess.new(app: "compat_queue.rb", args: args, env: env).start
    @servers.last
  end

  def sidekiq_server(args: ["-c", "2"], env: {})
    @servers << ServerProcess.new(kind: :sidekiq, app: "compat_sidekiq.rb", args: args, env: env).start
    @servers.last
  end

  # The one Sidekiq::Process entry of `server`, once its heartbeat is in Redis.
  def sidekiq_process_of(server)
    wait_until("process #{server.pid} in Sidekiq::ProcessSet") do
      Sidekiq::ProcessSet.new.find { |p| p["pid"] == server.pid }
    end
  end
end

RSpec.configure do |config|
  config.include CompatHelpers, :compat
  config.before(:each, :compat) do
    CompatHelpers.configure_sidekiq_client
    @strict_args = Sidekiq.options[:on_complex_arguments]
    Sidekiq.strict_args!
    @servers = []
  end
  config.after(:each, :compat) do |example|
    Sidekiq.options[:on_complex_arguments] = @strict_args
    @servers.each do |server|
      warn("\n--- #{server.log}\n#{server.output}") if example.exception
      server.ensure_stopped
    end
  end
end
