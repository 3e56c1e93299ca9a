# frozen_string_literal: true

require "json"
require "queue"

module JobQueue
  # RSpec support for GitLab-style idempotent workers: `require "queue/rspec"` in a spec helper, then
  #
  #   RSpec.describe AuthorizedProjectsWorker do
  #     let(:job_args) { [user.id] }          # optional; none by default
  #
  #     it_behaves_like "an idempotent worker" do
  #       it "refreshes once" do
  #         perform_idempotent_work           # or `subject`: runs the job twice
  #         expect(user.reload.authorizations.count).to eq(2)
  #       end
  #     end
  #   end
  #
  # The job really runs, as a server would run it (its arguments through JSON), with nothing mocked.
  module RSpec
    # Helpers of the example group: `perform_multiple(args = job_args, worker: described_class.new,
    # exec_times: 2)` and `perform_idempotent_work`.
    module IdempotentWorkerHelper
      EXEC_TIMES = 2

      def perform_multiple(args = idempotent_job_args, worker: described_class.new, exec_times: EXEC_TIMES)
        args = args.nil? ? [nil] : Array(args)
        JobQueue::JsonArgs.check!(args, worker.class.name)
        exec_times.times { worker.perform(*JSON.parse(JSON.generate(args))) }
      end

      def perform_idempotent_work
        perform_multiple
      end

      # `job_args` when the example group defines it, else no arguments.
      def idempotent_job_args
        respond_to?(:job_args) ? job_args : []
      end
    end
  end
end

::RSpec.shared_examples "an idempotent worker" do
  include JobQueue::RSpec::IdempotentWorkerHelper

  subject { perform_multiple }

  it "is declared idempotent!" do
    idempotent = described_class.respond_to?(:idempotent?) && described_class.idempotent?
    expect(idempotent).to be(true), <<~MSG.tr("\n", " ").strip
      #{described_class} is not declared idempotent: 'an idempotent worker' checks workers that call
      `idempotent!` in their class body (their duplicate jobs are dropped); declare it, or do not use
      this shared example for a worker that is not safe to run twice.
    MSG
  end

  it "performs multiple times sequentially without raising an exception" do
    expect { subject }.not_to raise_error
  end
end
