# frozen_string_literal: true

require "csv"
require "tempfile"

# The enumerator builders of JobQueue::Iterable (Sidekiq 7.3's), and what an iterable job refuses.
RSpec.describe JobQueue::Iterable do
  let(:job_class) do
    Class.new do
      include JobQueue::IterableJob

      def self.name = "EnumeratorsJob"
    end
  end
  let(:job) { job_class.new }

  describe "#array_enumerator" do
    it "yields (item, index) from the cursor on, with a size" do
      enum = job.array_enumerator(%w[a b c d], cursor: 2)
      expect(enum).to be_a(Enumerator)
      expect(enum.size).to eq(2)
      expect(enum.to_a).to eq([["c", 2], ["d", 3]])
      expect(job.array_enumerator(%w[a b], cursor: nil).to_a).to eq([["a", 0], ["b", 1]])
    end

    it "refuses what is not an Array, and a cursor that is not an index" do
      expect { job.array_enumerator({a: 1}, cursor: nil) }.to raise_error(ArgumentError, /takes an Array, got Hash/)
      expect { job.array_enumerator([1], cursor: "1") }.to raise_error(ArgumentError, /cursor must be nil or an index/)
      expect { job.array_enumerator([1], cursor: -1) }.to raise_error(ArgumentError, /cursor must be nil or an index/)
    end
  end

  describe "#csv_enumerator and #csv_batches_enumerator" do
    let(:file) do
      Tempfile.new(["rows", ".csv"]).tap do |f|
        f.write("id,name\n1,a\n2,b\n3,c\n4,d\n5,e\n")
        f.flush
      end
    end

    after { file.close! }

    it "yields rows (row, index) and batches (rows, batch index) from the cursor on, sized from the file" do
      rows = job.csv_enumerator(CSV.open(file.path, headers: true), cursor: 3)
      expect(rows.size).to eq(5)
      expect(rows.to_a.map { |row, index| [row["id"], index] }).to eq([["4", 3], ["5", 4]])

      batches = job.csv_batches_enumerator(CSV.open(file.path, headers: true), cursor: 1, batch_size: 2)
      expect(batches.size).to eq(3)
      expect(batches.to_a.map { |batch, index| [batch.map { |row| row["id"] }, index] }).to eq([[%w[3 4], 1], [%w[5], 2]])
    end

    it "refuses what is not a CSV object" do
      expect { job.csv_enumerator(File.open(file.path), cursor: nil) }.to raise_error(ArgumentError, /takes a CSV object, got File/)
      expect { job.csv_batches_enumerator(CSV.open(file.path), cursor: nil, batch_size: 0) }.to raise_error(ArgumentError, /batch_size/)
    end
  end

  # activerecord and sqlite3 are not in the bundle: spec/apps/iterable_active_record.rb runs them in a
  # Ruby outside it and reports what the enumerators yielded.
  describe "the ActiveRecord enumerators" do
    let(:result) do
      script = File.expand_path("../apps/iterable_active_record.rb", __dir__)
      # Outside any bundle this spec may run under (plain `rspec`, as CI runs it, loads no Bundler).
      unbundled = {"BUNDLE_GEMFILE" => nil, "BUNDLE_BIN_PATH" => nil, "RUBYOPT" => nil, "RUBYLIB" => nil}
      output = IO.popen(unbundled, [RbConfig.ruby, script], err: [:child, :out], &:read)
      expect($?.success?).to be(true), output
      JSON.parse(output.lines.last)
    end

    it "yield records, batches and relations with a record id as the cursor, from the cursor's record on" do
      ids = result["ids"]
      expect(result["records_size"]).to eq(7)
      expect(result["records"]).to eq([["p4", ids[4]], ["p5", ids[5]], ["p6", ids[6]]])
      expect(result["batches"]).to eq([[%w[p1 p2 p3 p4], ids[1]], [%w[p5 p6], ids[5]]])
      expect(result["relations_size"]).to eq(3)
      expect(result["relation_classes"]).to eq([true])
      expect(result["relations"]).to eq([[%w[p0 p1 p2], ids[0]], [%w[p3 p4 p5], ids[3]], [%w[p6], ids[6]]])
      expect(result["refused"]).to match(/ActiveRecord::Relation is needed, got Array/)
    end
  end

  describe "an iterable job class" do
    it "may not define #perform" do
      expect {
        Class.new do
          include JobQueue::IterableJob

          def perform; end
        end
      }.to raise_error(ArgumentError, /must not define #perform/)
    end

    it "must return an Enumerator from build_enumerator, and implement both methods" do
      job_class.define_method(:build_enumerator) { |cursor:| [1, 2] }
      runner = job_class.new.tap { |j| j.jid = "abc" }
      expect { runner.perform }.to raise_error(ArgumentError, /must return an Enumerator, but returned Array/)

      bare = Class.new { include JobQueue::IterableJob }.new.tap { |j| j.jid = "abd" }
      expect { bare.perform }.to raise_error(NotImplementedError, /must implement a '#build_enumerator' method/)
    end

    it "is not interrupted outside a server" do
      expect(job.interrupted?).to be_falsey
    end
  end
end
