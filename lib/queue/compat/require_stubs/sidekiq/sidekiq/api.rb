# frozen_string_literal: true

require_relative "../../../sidekiq"

raise JobQueue::Compat.unsupported("require \"sidekiq/api\"",
  "JobQueue.stats gives the totals; for Sidekiq's API classes (Queue, RetrySet, DeadSet, ProcessSet, …) " \
  "use the real sidekiq gem in a process without this shim, on the same Redis")
