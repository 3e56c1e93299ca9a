# frozen_string_literal: true

class PlainWorker
  include JobQueue::Worker

  def perform(key, value)
    Entry.write!("plain", key, value)
  end
end
