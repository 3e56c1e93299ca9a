# frozen_string_literal: true

# README "Batches": its example is valid Ruby, and names only the API JobQueue::Batch has (the
# behaviour itself is spec/api/batch_spec.rb's).
RSpec.describe "README Batches" do
  let(:block) { Readme.blocks("## Batches", count: 1).first }

  it "is valid Ruby" do
    expect { RubyVM::InstructionSequence.compile(block.code, Readme::PATH, Readme::PATH, block.line) }.not_to raise_error
  end

  it "calls only methods the batch classes answer" do
    code = block.code
    batch = code.scan(/\bbatch\.(\w+[?=]?)/).flatten.uniq - %w[jobs] # `batch.jobs` inside a job is the job's batch
    expect(batch.map { |m| m.delete_suffix("=") }.reject { |m| JobQueue::Batch.method_defined?(m) || JobQueue::Batch.method_defined?("#{m}=") }).to eq([])
    status = code.scan(/\bstatus\.(\w+\??)/).flatten.uniq
    expect(status.reject { |m| JobQueue::Batch::Status.method_defined?(m) }).to eq([])
    expect(JobQueue::Worker.method_defined?(:valid_within_batch?)).to be(true)
  end
end
