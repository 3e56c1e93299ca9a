# frozen_string_literal: true

RSpec.describe JobQueue::OrderedWorker do
  let(:redis) { TestRedis.client }

  describe "declaring a worker" do
    it "has Lowkiq's defaults, the module's name as queue name and JSON payloads" do
      worker = ordered_worker("OrderedDefaultsWorker")
      expect([worker.shards_count, worker.batch_size, worker.max_retry_count, worker.queue_name, worker.payload_format])
        .to eq([5, 1, 25, "OrderedDefaultsWorker", :json])
      expect((0..4).map { |c| worker.retry_in(c) }).to all(be_between(15, 15 + 4**4 + 29 * 5))
      expect(worker.retry_in(0)).to be_between(15, 44)
      expect(worker.retries_exhausted([])).to be_nil
      expect { worker.perform({}) }.to raise_error(NotImplementedError, /self.perform/)
    end

    it "takes Lowkiq's settings as written in its document" do
      worker = ordered_worker("ATestWorker") do
        self.shards_count = 24
        self.batch_size = 10
        self.max_retry_count = 5
        self.queue_name = "#{name}_V2"
        payload_format :marshal

        def self.retry_in(count) = 10 * (count + 1)
      end
      expect([worker.shards_count, worker.batch_size, worker.max_retry_count, worker.queue_name, worker.payload_format])
        .to eq([24, 10, 5, "ATestWorker_V2", :marshal])
      expect(worker.retry_in(4)).to eq(50)
      expect(JobQueue::OrderedWorker.workers).to include(worker)
    end

    it "raises a clear ArgumentError at a bad declaration" do
      worker = ordered_worker("OrderedBadWorker")
      expect { worker.shards_count = 0 }.to raise_error(ArgumentError, /OrderedBadWorker: shards_count must be an Integer from 1/)
      expect { worker.shards_count = "5" }.to raise_error(ArgumentError, /shards_count/)
      expect { worker.batch_size = -1 }.to raise_error(ArgumentError, /batch_size must be an Integer from 1/)
      expect { worker.max_retry_count = 1.5 }.to raise_error(ArgumentError, /max_retry_count must be an Integer from 0/)
      expect { worker.queue_name = "" }.to raise_error(ArgumentError, /queue_name must be a non-empty String/)
      expect { worker.payload_format :yaml }.to raise_error(ArgumentError, /unknown payload_format :yaml; use :json \(the default\) or :marshal/)
      expect(worker.shards_count).to eq(5)
    end

    it "asks an anonymous worker for a queue name" do
      worker = Module.new.extend(described_class)
      ordered_workers_made << worker
      expect { worker.perform_async([{id: 1}]) }.to raise_error(ArgumentError, /anonymous ordered worker needs `self.queue_name = ...`/)
    end
  end

  describe "perform_async" do
    let(:worker) { ordered_worker("OrderedPushWorker") }

    it "writes Lowkiq's v1 keys: indexes, the id's shard and its payloads, with the defaults" do
      before = Time.now.to_f
      expect(worker.perform_async([{id: 0}, {id: 1, payload: {attr: "v1"}}, {id: 2, payload: {attr: "v1"}, score: 7, perform_in: 1_700_000_000.5}])).to eq(3)
      after = Time.now.to_f

      keys = redis.keys("*").sort
      shards = [0, 1, 2].map { |id| shard_of(id, 5) }.uniq.map { |s| lowkiq_key(worker, "ids_scored_by_perform_in:#{s}") }
      expect(keys).to eq((%w[all_ids_lex all_ids_scored_by_perfrom_in all_ids_scored_by_retry_count payloads:0 payloads:1 payloads:2]
        .map { |s| lowkiq_key(worker, s) } + shards).sort)
      expect(zset(lowkiq_key(worker, "all_ids_lex"))).to eq([["0", 0.0], ["1", 0.0], ["2", 0.0]])
      expect(zset(lowkiq_key(worker, "all_ids_scored_by_retry_count"))).to eq([["0", -1.0], ["1", -1.0], ["2", -1.0]])

      fresh = queued_state(worker, "0")
      expect(fresh[:payloads].map(&:first)).to eq(['""'])
      expect(fresh[:payloads].first.last).to be_between(before, after)
      expect(fresh[:perform_in]).to be_between(before, after)
      expect(fresh[:shard_perform_in]).to eq(fresh[:perform_in])
      expect(queued_state(worker, "1")[:payloads].map(&:first)).to eq(['{"attr":"v1"}'])
      expect(queued_state(worker, "2")).to include(payloads: [['{"attr":"v1"}', 7.0]], perform_in: 1_700_000_000.5, shard_perform_in: 1_700_000_000.5)
    end

    it "keeps Marshal payloads byte for byte when the worker opts in, under its queue name" do
      worker = ordered_worker("OrderedMarshalWorker") do
        payload_format :marshal
        self.queue_name = "marshalled"
      end
      payload = {sym: :v1, at: Time.at(0).utc, list: [1, 2.5]}
      worker.perform_async([{id: "a", payload: payload, score: 1}])
      expect(redis.zrange("lowkiq:A:v1:marshalled:payloads:a", 0, -1).map(&:b)).to eq([Marshal.dump(payload).b])
    end

    it "merges: payloads union, identical payloads keep the lowest score" do
      worker.perform_async([{id: "1", payload: "v1", score: 1}, {id: "1", payload: "v2", score: 2}])
      worker.perform_async([{id: "1", payload: "v2", score: 3}, {id: "1", payload: "v3", score: 4}])
      worker.perform_async([{id: "1", payload: "v3", score: 0.5}])
      expect(queued_state(worker, "1")[:payloads]).to eq([['"v3"', 0.5], ['"v1"', 1.0], ['"v2"', 2.0]])
    end

    it "merges new into queued: the queued perform_in and retry_count stay" do
      worker.perform_async([{id: "1", payload: "v1", perform_in: 100}])
      expect(worker.perform_async([{id: "1", payload: "v2", perform_in: 50}, {id: "1", payload: "v3", perform_in: 200}])).to eq(0)
      expect(queued_state(worker, "1")).to include(perform_in: 100.0, shard_perform_in: 100.0, retry_count: -1.0)
    end

    it "lets the worker compute ids by overriding perform_async" do
      worker = ordered_worker("OrderedIdWorker") do
        def self.perform_async(jobs)
          super(jobs.map { |job| job.merge(id: job[:payload][:id]) })
        end
      end
      worker.perform_async(3.times.map { |id| {payload: {id: id}} })
      expect(redis.zrange(lowkiq_key(worker, "all_ids_lex"), 0, -1)).to eq(%w[0 1 2])
    end

    it "refuses bad jobs with an ArgumentError before writing anything" do
      expect { worker.perform_async({id: 1}) }.to raise_error(ArgumentError, /takes an Array of job Hashes/)
      expect { worker.perform_async([{id: 1}, {payload: "x"}]) }.to raise_error(ArgumentError, /job 1 has no id/)
      expect { worker.perform_async([{id: 1, paylaod: "x"}]) }.to raise_error(ArgumentError, /unknown key\(s\) paylaod/)
      expect { worker.perform_async([{id: 1, payload: Object.new}]) }.to raise_error(ArgumentError, /payload is a Object/)
      expect { worker.perform_async([{id: 1, payload: {"a" => Float::NAN}}]) }.to raise_error(ArgumentError, /non-finite Float/)
      expect { worker.perform_async([{id: 1, score: "soon"}]) }.to raise_error(ArgumentError, /score must be a finite number or a Time/)
      expect { worker.perform_async([{id: 1, perform_in: Float::INFINITY}]) }.to raise_error(ArgumentError, /perform_in must be a finite number/)
      expect(redis.keys("*")).to be_empty
    end

    it "writes under the configured namespace" do
      JobQueue.configure { |c| c.namespace = "ns" }
      worker.perform_async([{id: 1}])
      expect(redis.zrange("ns:lowkiq:A:v1:OrderedPushWorker:all_ids_lex", 0, -1)).to eq(["1"])
    end
  end
end
