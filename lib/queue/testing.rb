# frozen_string_literal: true

# Test modes for apps, in the spirit of Sidekiq::Testing:
#
#   require "queue/testing"          # switches to fake mode, as `require "sidekiq/testing"` does
#
#   JobQueue::Testing.fake!          # pushes go to in-memory arrays: HardWorker.jobs, .drain, ...
#   JobQueue::Testing.inline!        # pushes run the job at once
#   JobQueue::Testing.disable!       # pushes go to Redis (the default without this file)
#   JobQueue::Testing.inline! { ... } # a block form sets the mode for the block only
#
# Client middleware runs in every mode; fake and inline replace only the write to Redis
# (JobQueue::Client#raw_push). Jobs run by inline mode, `drain` and `perform_one` go through the
# configured server middleware, and exceptions reach the caller. Ordered workers have the fake and
# inline modes too (testing/ordered.rb).
require_relative "../queue"
require_relative "testing/modes"
require_relative "testing/fake_queues"
require_relative "testing/client"
require_relative "testing/worker"
require_relative "testing/ordered"

JobQueue::Testing.fake!
