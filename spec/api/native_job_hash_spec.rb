# frozen_string_literal: true

require "json"
require "spec_helper"

# A server builds each job's Hash in the engine (ext/queue/src/ruby_api/job_hash.rs, reading with
# queue_core::plain_json) instead of calling JSON.parse. It must build exactly what JSON.parse builds,
# or decline and leave the job to JSON.parse. These examples hold the two side by side on hand-written
# jobs and on many generated ones.
RSpec.describe "the job Hash the engine builds" do
  # The same Ruby value, to the class, the bits of a Float, the encoding, code range and frozenness of a String,
  # and the order and identity (interned) of a Hash's keys.
  def same!(built, parsed, path = "job")
    expect(built.class).to eq(parsed.class), "#{path}: #{built.class} against #{parsed.class}"
    case parsed
    when Hash
      expect(built.keys).to eq(parsed.keys), "#{path}: keys"
      built.each_key { |key| expect(key).to be_frozen.and(equal(-key)), "#{path}: key #{key.inspect} not interned" }
      parsed.each { |key, value| same!(built[key], value, "#{path}[#{key.inspect}]") }
    when Array
      expect(built.size).to eq(parsed.size), "#{path}: size"
      parsed.each_with_index { |value, i| same!(built[i], value, "#{path}[#{i}]") }
    when Float
      expect([built].pack("G")).to eq([parsed].pack("G")), "#{path}: #{built} against #{parsed}"
    when String
      expect(built).to eq(parsed), "#{path}: text"
      expect(built.encoding).to eq(parsed.encoding), "#{path}: encoding"
      expect(built.frozen?).to eq(parsed.frozen?), "#{path}: frozen"
      # The code range the engine gives a String as it makes it is what Ruby's scan of the parsed one
      # finds.
      expect([built.ascii_only?, built.valid_encoding?]).to eq([parsed.ascii_only?, parsed.valid_encoding?]),
        "#{path}: code range"
    else
      expect(built).to eql(parsed), "#{path}: #{built.inspect} against #{parsed.inspect}"
    end
  end

  # The engine's Hash for `json`, checked against JSON.parse's when it builds one, and its lean
  # reading (what a server reads of a job it runs without building its Hash) with it. Returns the
  # Hash (nil when it declined).
  def compare(json)
    built = JobQueue::Native.job_hash(json)
    parsed = begin
      JSON.parse(json)
    rescue JSON::ParserError, EncodingError => e
      e
    end
    if built
      expect(parsed).not_to be_a(Exception), "built a Hash from JSON that JSON.parse refuses: #{json.inspect[0, 200]}"
      same!(built, parsed)
    end
    lean_same!(JobQueue::Native.job_lean(json), built && parsed, json)
    built
  end

  # The lean reading declines exactly where the Hash is declined, and otherwise holds what the Hash
  # holds: `args`, `jid`, `bid` and `idempotency_key` built alike, the flags the processor looks at,
  # and the class name (nil only where it is not a String written without escapes).
  def lean_same!(lean, parsed, json)
    return expect(lean).to(be_nil, "a lean reading of JSON the Hash declines: #{json.inspect[0, 200]}") unless parsed

    expect(lean).not_to be_nil, "no lean reading of #{json.inspect[0, 200]}"
    if lean["class"].nil?
      expect(!parsed["class"].is_a?(String) || json.include?("\\")).to be(true), "no class read from #{json.inspect[0, 200]}"
    else
      same!(lean["class"], parsed["class"], "lean class")
    end
    {"jid" => "jid", "args" => "args", "bid" => "bid", "key" => "idempotency_key"}.each do |name, field|
      same!(lean[name], parsed[field], "lean #{name}")
    end
    flags = {"idempotency_key" => !!parsed["idempotency_key"], "duplicate_of" => parsed.key?("duplicate-of"),
             "wal_locations" => parsed.key?("wal_locations"), "expires_at" => parsed.key?("expires_at"),
             "meta" => parsed.keys.any? { |key| key.start_with?("meta.") }, "wrapped" => parsed.key?("wrapped")}
    expect(lean.slice(*flags.keys)).to eq(flags), "lean flags of #{json.inspect[0, 200]}"
  end

  let(:job) do
    {"class" => "HardWorker", "args" => [1, "two", {"three" => [3.5, nil, true, false]}], "retry" => true,
     "queue" => "default", "jid" => "0123456789abcdef01234567", "created_at" => 1_764_294_000.1234567,
     "enqueued_at" => Time.now.to_f}
  end

  it "builds the Hashes of jobs as Sidekiq, ActiveJob and GitLab write them" do
    jobs = [
      job,
      job.merge("args" => []),
      job.merge("class" => "ActiveJob::QueueAdapters::SidekiqAdapter::JobWrapper", "wrapped" => "ImportJob",
        "args" => [{"job_class" => "ImportJob", "job_id" => "a-b-c", "arguments" => [42, {"_aj_symbol_keys" => []}],
                    "executions" => 0, "locale" => "en", "timezone" => "UTC", "enqueued_at" => "2026-11-28T01:00:00Z"}]),
      job.merge("meta.user" => "alice", "meta.project" => "group/app", "idempotency_key" => "resque:gitlab:x",
        "wal_locations" => {"main" => "0/D525E3A8"}, "retry_count" => 2, "error_message" => "boom \"quoted\"\n\tline",
        "error_class" => "RuntimeError", "failed_at" => 1_764_294_001.5, "backtrace" => nil),
      job.merge("args" => ["ünïcødé ✓", "日本語", "emoji 🎉", "tab\t nl\n cr\r ff\f bs\b slash/ back\\ quote\""]),
      job.merge("args" => [0, -0, 9_223_372_036_854_775_807, -9_223_372_036_854_775_808, 0.0, -0.0, 1.0e-300, 1.5e300, 0.1]),
      job.merge("class" => "HardWorker", "class_again" => "x"),
      # More arguments than the engine holds inline, and `args` that are no Array.
      job.merge("args" => (1..12).map { |i| [i, {"k" => [i]}] }),
      job.merge("args" => {"not" => ["an", "array"]}), job.merge("args" => "text"),
      # Read fields holding objects with the read keys in them: each is read alone, as deep as it was.
      job.merge("bid" => {"jid" => "inner", "args" => [9], "class" => "Inner", "wrapped" => "W"},
        "idempotency_key" => {"bid" => "b", "idempotency_key" => nil, "meta.x" => 1}),
      # Every key the engine keeps interned (job_hash.rs KNOWN_KEYS), each with a value of its own.
      %w[class args retry queue jid created_at enqueued_at bid wrapped retry_count retried_at failed_at
        error_message error_class backtrace tags at job_class job_id provider_job_id queue_name arguments
        executions locale].each_with_index.to_h { |key, i| [key, key == "args" ? [i] : "#{key}-#{i}"] }
    ]
    jobs.each do |hash|
      [JSON.generate(hash), JSON.pretty_generate(hash)].each do |json|
        expect(compare(json)).not_to be_nil, "declined #{json[0, 120]}"
      end
    end
  end

  it "keeps the last of a duplicated key, where the first one stood" do
    built = compare('{"class":"A","args":[],"class":"B","jid":"j"}')
    expect(built.keys).to eq(%w[class args jid])
    expect(built["class"]).to eq("B")
    # Past the eight pairs the engine inserts together (as many as Ruby's small table holds), and
    # past twice that, with repeats on either side of each boundary.
    repeated = compare("{#{(1..40).map { |i| %("k#{i % 11}":#{i}) }.join(",")}}")
    expect(repeated.keys).to eq((1..11).map { |i| "k#{i % 11}" })
    expect(repeated["k3"]).to eq(36)
    expect(compare("{#{(1..40).map { |i| %("k#{i}":"v#{i}") }.join(",")}}").size).to eq(40)
  end

  it "declines what only JSON.parse reads alike, and builds nothing JSON.parse refuses" do
    declined = [
      '{"args":["\\u00e9"]}', '{"args":[12345678901234567890]}', '{"args":[1.23456789012345678901]}',
      '{"args":[1e400]}', '{"args":[1e-400]}', '{"args":[] /* note */}', '{"args":[NaN]}',
      '{"args":[1,]}', '{"args":[01]}', "{\"args\":[\"a\u0001b\"]}", '{"args":["\\q"]}', "",
      '["not", "a", "hash"]', '"text"', "12", "null", "{\"args\":[\"\xff\"]}",
      "#{"[" * 101}#{"]" * 101}", "{\"a\":#{"[" * 100}#{"]" * 100}}"
    ]
    declined.each { |json| expect(compare(json)).to be_nil, "built #{json.inspect[0, 80]}" }
    expect(compare("{\"a\":#{"[" * 99}#{"]" * 99}}")).not_to be_nil
  end

  it "agrees with JSON.parse on generated values" do
    rng = Random.new(20_261_128)
    text = lambda do
      pool = ["a", "Z", "0", " ", "\"", "\\", "/", "\n", "\t", "\u0001", "\u001f", "\u007f", "é", "日", "🎉", "\u2028", "{", "]", ":"]
      Array.new(rng.rand(0..12)) { pool.sample(random: rng) }.join
    end
    number = lambda do
      case rng.rand(8)
      when 0 then rng.rand(-1000..1000)
      when 1 then rng.rand(-(2**63)..(2**63 - 1))
      when 2 then rng.rand(2**64..2**70) * (rng.rand(2).zero? ? 1 : -1)
      when 3 then rng.rand * 10**rng.rand(-20..20)
      when 4 then [rng.bytes(8)].pack("a8").unpack1("G")
      when 5 then Time.now.to_f + rng.rand
      when 6 then (rng.rand(-1e6..1e6) * 10**rng.rand(-320..300))
      else -rng.rand.round(rng.rand(0..6))
      end
    end
    value = lambda do |depth|
      kind = depth > 4 ? rng.rand(4) : rng.rand(7)
      case kind
      when 0 then text.call
      when 1 then number.call
      when 2 then [true, false, nil].sample(random: rng)
      when 3 then number.call
      when 4, 5 then Array.new(rng.rand(0..4)) { value.call(depth + 1) }
      else Array.new(rng.rand(0..4)) { [text.call, value.call(depth + 1)] }.to_h
      end
    end
    built = 0
    3_000.times do
      hash = job.merge("args" => Array.new(rng.rand(0..3)) { value.call(0) }, text.call => value.call(1))
      json = begin
        JSON.generate(hash)
      rescue JSON::GeneratorError # NaN and Infinity among the random Floats
        next
      end
      [json, JSON.generate(hash, ascii_only: true), JSON.pretty_generate(hash, allow_nan: true)].each do |variant|
        built += 1 if compare(variant)
      end
    end
    expect(built).to be > 1_000 # not all declined (control characters, Bignums and \u escapes are)
  end

  it "agrees with JSON.parse on every decimal it reads as a Float" do
    rng = Random.new(7)
    20_000.times do
      digits = Array.new(rng.rand(1..19)) { rng.rand(10) }.join
      point = rng.rand(0..digits.size)
      mantissa = point.zero? ? "0.#{digits}" : "#{digits[0, point]}.#{digits[point..]}".sub(/\.\z/, ".0")
      mantissa = mantissa.sub(/\A0+(?=\d)/, "")
      exponent = rng.rand(3).zero? ? "" : "e#{rng.rand(-330..310)}"
      number = "#{rng.rand(2).zero? ? "-" : ""}#{mantissa}#{exponent}"
      # In "args" it is built; in "created_at" the lean reading only reads it.
      compare(%({"args":[#{number}],"created_at":#{number}}))
    end
  end

  it "agrees with JSON.parse on damaged job JSON" do
    rng = Random.new(11)
    json = JSON.generate(job.merge("args" => [1, "two", {"three" => [3.5, nil, true]}, -4.25e-7]))
    5_000.times do
      damaged = json.b
      rng.rand(1..3).times do
        at = rng.rand(damaged.size)
        case rng.rand(3)
        when 0 then damaged[at] = damaged[rng.rand(damaged.size)]
        when 1 then damaged.insert(at, ["\"", "\\", ",", "]", "}", " ", "e", "-", ".", "\xc3", "0"].sample(random: rng))
        else damaged.slice!(at)
        end
      end
      compare(damaged.force_encoding(Encoding::UTF_8))
    end
  end
end
