# frozen_string_literal: true

# Safe to run twice: it sets the row for its key rather than adding one.
class IdempotentWorker
  include JobQueue::Worker
  idempotent!

  def perform(key, value)
    Entry.write!("idempotent", key, value, replace: true)
  end
end
