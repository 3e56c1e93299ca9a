# frozen_string_literal: true

require "json"
require "queue"
require_relative "testing/modes"
require_relative "testing/ordered"

module JobQueue
  # RSpec support: shared examples for GitLab-style idempotent workers ("an idempotent worker") and
  # ordered workers ("an ordered worker", below). `require "queue/rspec"` in a spec helper, then
  #
  #   RSpec.describe AuthorizedProjectsWorker do
  #     let(:user) { User.create!(projects: [Project.new, Project.new]) }
  #     let(:job_args) { [user.id] }          # optional; none by default
  #
  #     it_behaves_like "an idempotent worker" do
  #       it "authorizes each of the user's 2 projects once, though the job ran twice" do
  #         perform_idempotent_work           # or `subject`: runs the job twice
  #         expect(user.project_authorizations.count).to eq(2)
  #       end
  #     end
  #   end
  #
  # The job really runs, as a server would run it (its arguments through JSON), with nothing mocked;
  # the shared example checks `idempotent!` and that both runs succeed, the group's own examples what
  # the second run leaves. (README "GitLab-style deduplication", run by spec/api/readme_dedup_spec.rb.)
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

    # Helper of "an ordered worker": `perform_ordered(jobs = ordered_jobs, worker: described_class)`
    # runs jobs (as `perform_async` takes them) the way a server would: validated and serialized,
    # merged by id, each id's payloads oldest first, `batch_size` ids per `perform`, inside the
    # ordered server middlewares. Nothing goes to Redis, whatever the test mode.
    module OrderedWorkerHelper
      def perform_ordered(jobs = ordered_worker_jobs, worker: described_class)
        JobQueue::Testing::Ordered.run(worker, JobQueue::Ordered::Client.rows(worker, jobs))
      end

      # `ordered_jobs` when the example group defines it, else one job with an empty payload.
      def ordered_worker_jobs
        respond_to?(:ordered_jobs) ? ordered_jobs : [{id: "1"}]
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

# For ordered workers (JobQueue::OrderedWorker):
#
#   RSpec.describe OrderSyncWorker do
#     let(:order) { Order.create!(state: "new") }
#     let(:ordered_jobs) { [{id: order.id, payload: {"state" => "paid"}}] }   # optional
#
#     it_behaves_like "an ordered worker" do
#       it "gives the order its latest state" do
#         perform_ordered                  # or `subject`
#         expect(order.reload.state).to eq("paid")
#       end
#     end
#   end
#
# (README "Test modes", with the worker, run by spec/api/readme_testing_spec.rb.)
::RSpec.shared_examples "an ordered worker" do
  include JobQueue::RSpec::OrderedWorkerHelper

  subject { perform_ordered }

  it "is an ordered worker with its own perform(payloads_by_id)" do
    expect(described_class.singleton_class.include?(JobQueue::OrderedWorker)).to be(true),
      "#{described_class} does not `extend JobQueue::OrderedWorker`"
    expect(described_class.method(:perform).owner).not_to eq(JobQueue::OrderedWorker),
      "#{described_class} does not define self.perform(payloads_by_id)"
  end

  it "performs its jobs, merged by id as a server hands them over, without raising" do
    expect { subject }.not_to raise_error
  end

  # Jobs run at least once, and a failure retries every id of its batch (payloads pushed meanwhile
  # merged in): running the same payloads again must be safe.
  it "performs the same jobs again without raising (a failed batch is retried whole)" do
    subject
    expect { perform_ordered }.not_to raise_error
  end
end
