# frozen_string_literal: true

require "digest"

# perform_async's common case is built by the engine (JobQueue::DirectPush); these examples hold it
# to what the Ruby client writes for the same job, byte for byte apart from jid and times.
RSpec.describe "perform_async built by the engine" do
  let(:redis) { TestRedis.client }

  def worker(name, &block)
    klass = Class.new do
      include JobQueue::Worker
      class_eval(&block) if block
    end
    klass.define_singleton_method(:name) { name }
    klass
  end

  let(:plain) { worker("DirectPlainWorker") { sidekiq_options retry: 3, tags: ["a"] } }
  let(:idempotent) { worker("DirectIdempotentWorker") { idempotent! } }

  # The raw job with its jid and times blanked.
  def shape(raw)
    raw.sub(/"jid":"\h{24}"/, '"jid":"J"').gsub(/"(created_at|enqueued_at)":[0-9.e+-]+/, '"\1":T')
  end

  def raw_jobs(queue = "default")
    redis.lrange("queue:#{queue}", 0, -1).reverse
  end

  def direct(klass, args)
    JobQueue.engine.push_new(klass.push_template.native, args, nil)
  end

  ARGS = [
    [],
    [1, -2, 2**61, nil, true, false],
    ["plain", "quote \" and backslash \\", "ünïcødé ✓ /slash/", ""],
    [{"a" => [1, {"b" => nil}], "c" => "d"}, [[[]]], {}]
  ].freeze

  it "writes what the Ruby client writes, in the same field order" do
    ARGS.each do |args|
      redis.del("queue:default")
      jid = direct(plain, args)
      expect(jid).to match(/\A\h{24}\z/)
      JobQueue::Client.new.push("class" => plain, "args" => args)
      engine_raw, ruby_raw = raw_jobs
      expect(shape(engine_raw)).to eq(shape(ruby_raw)), "args #{args.inspect}"
      job = JSON.parse(engine_raw)
      expect(job["jid"]).to eq(jid)
      expect(job["created_at"]).to eq(job["enqueued_at"])
      expect(job["created_at"]).to be_within(5).of(Time.now.to_f)
    end
    expect(redis.smembers("queues")).to eq(["default"])
  end

  it "leaves arguments it does not write to the Ruby client, which gives the same result" do
    [[1.5], [2**64], ["tab\there"], ["bin\xFF".b], [{1 => "x"}], [:sym], [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]].each do |args|
      expect(direct(plain, args)).to be_nil, "args #{args.inspect}"
    end
    expect(redis.llen("queue:default")).to eq(0)

    expect(plain.perform_async(1.5, "tab\there", 2**64)).to match(/\A\h{24}\z/)
    expect(JSON.parse(raw_jobs.last)["args"]).to eq([1.5, "tab\there", 2**64])
    expect { plain.perform_async(:sym) }.to raise_error(ArgumentError, /args\[0\] is a Symbol/)
  end

  it "takes the idempotency key GitLab's digest gives, and drops the duplicate" do
    args = ["quote \" and \\", {"ü" => [1, nil]}]
    jid = idempotent.perform_async(*args)
    expect(jid).to match(/\A\h{24}\z/)
    expect(idempotent.perform_async(*args)).to be_nil

    key = "duplicate:default:#{Digest::SHA256.hexdigest("DirectIdempotentWorker:#{JSON.generate(args)}")}"
    expect(redis.get(key)).to eq(jid)
    expect(redis.ttl(key)).to be_within(5).of(6 * 60 * 60)
    jobs = raw_jobs.map { |raw| JSON.parse(raw) }
    expect(jobs.map { |j| j["jid"] }).to eq([jid])
    expect(jobs.first["idempotency_key"]).to eq(key)
  end

  it "steps aside for client middleware and a worker context" do
    stamp = Class.new do
      def call(_worker, job, _queue, _redis)
        job["seen"] = true
        yield
      end
    end
    JobQueue.configure { |c| c.client_middleware { |chain| chain.add(stamp) } }
    plain.perform_async(1)
    JobQueue.config.client_middleware_chain.clear
    JobQueue::Context.with(caller_id: "spec") { plain.perform_async(2) }
    plain.perform_async(3)

    jobs = raw_jobs.map { |raw| JSON.parse(raw) }
    expect(jobs.map { |j| [j["args"], j["seen"], j["meta.caller_id"]] }).to eq([[[1], true, nil], [[2], nil, "spec"], [[3], nil, nil]])
  end

  describe "perform_bulk" do
    def bulk(klass, args_list)
      JobQueue.engine.push_bulk_new(klass.push_template.native, args_list, nil)
    end

    # The field order is the Ruby client's single push (and Sidekiq's bulk push: jid before
    # created_at); the Ruby client's own bulk path writes jid after created_at.
    it "writes what the Ruby client writes, in order, with one time for the batch" do
      jids = bulk(plain, ARGS)
      expect(jids).to all(match(/\A\h{24}\z/))
      expect(jids.uniq.size).to eq(ARGS.size)
      engine_raws = raw_jobs
      redis.del("queue:default")
      ARGS.each { |args| JobQueue::Client.new.push("class" => plain, "args" => args) }

      expect(engine_raws.map { |raw| shape(raw) }).to eq(raw_jobs.map { |raw| shape(raw) })
      jobs = engine_raws.map { |raw| JSON.parse(raw) }
      expect(jobs.map { |j| j["jid"] }).to eq(jids)
      expect(jobs.map { |j| j["args"] }).to eq(ARGS)
      expect(jobs.map { |j| [j["created_at"], j["enqueued_at"]] }.uniq.size).to eq(1)
    end

    it "is what perform_bulk and bulk_perform_async use, a slice of at most 1,000 a call" do
      calls = []
      engine = JobQueue.engine
      engine.define_singleton_method(:push_bulk_new) { |*args| calls << args[1].size; super(*args) }
      jids = plain.perform_bulk(Array.new(2500) { |i| [i] })
      expect(calls).to eq([1000, 1000, 500])
      expect(jids.size).to eq(2500)
      expect(raw_jobs.map { |raw| JSON.parse(raw)["args"] }).to eq(Array.new(2500) { |i| [i] })
    ensure
      engine.singleton_class.remove_method(:push_bulk_new)
    end

    it "leaves a slice with an argument it does not write to the Ruby client" do
      expect(bulk(plain, [[1], [1.5]])).to be_nil
      expect(bulk(plain, [[1], "not args"])).to be_nil
      expect(redis.llen("queue:default")).to eq(0)

      jids = plain.perform_bulk([[1], [1.5], ["tab\there"]])
      expect(raw_jobs.map { |raw| JSON.parse(raw).values_at("jid", "args") }).to eq(jids.zip([[1], [1.5], ["tab\there"]]))
      expect { plain.perform_bulk([[1], :sym]) }.to raise_error(ArgumentError, /Array of Arrays/)
      expect { plain.perform_bulk([[1], [:sym]]) }.to raise_error(ArgumentError, /args\[0\] is a Symbol/)
      expect(redis.llen("queue:default")).to eq(3)
    end

    it "deduplicates in the same call, returning the jids of the jobs queued" do
      held = idempotent.perform_async(2)
      jids = idempotent.perform_bulk([[1], [2], [3], [1]])
      expect(jids.size).to eq(2)
      jobs = raw_jobs.map { |raw| JSON.parse(raw) }
      expect(jobs.map { |j| [j["jid"], j["args"]] }).to eq([[held, [2]], [jids[0], [1]], [jids[1], [3]]])
      key = "duplicate:default:#{Digest::SHA256.hexdigest("DirectIdempotentWorker:#{JSON.generate([3])}")}"
      expect(redis.get(key)).to eq(jids[1])
    end
  end

  # The binding checks on each call that the thread's handle was made in this process; the pid it
  # compares is kept in memory and renewed in a child at fork (link/process_id.rs).
  it "dials a connection of its own in a forked child, leaving the parent's alone" do
    plain.perform_async(1)
    clients = -> { redis.call("CLIENT", "LIST").lines.size }
    before = clients.()
    reader, writer = IO.pipe
    go_on_reader, go_on = IO.pipe
    child = fork do
      reader.close
      go_on.close
      plain.perform_async(2)
      writer.puts "pushed"
      writer.close
      go_on_reader.read # holds the child's connection open until the parent has counted
      exit!(0)
    end
    writer.close
    go_on_reader.close
    expect(reader.gets).to eq("pushed\n")
    expect(clients.()).to eq(before + 1)
    go_on.close
    Process.wait(child)
    expect($?.exitstatus).to eq(0)
    plain.perform_async(3)
    expect(raw_jobs.map { |raw| JSON.parse(raw)["args"] }).to eq([[1], [2], [3]])
  end

  it "picks up changed options" do
    plain.perform_async(1)
    plain.sidekiq_options queue: "other"
    plain.perform_async(2)
    expect(JSON.parse(raw_jobs.first)["args"]).to eq([1])
    expect(JSON.parse(raw_jobs("other").first)).to include("queue" => "other", "args" => [2])
  end
end
