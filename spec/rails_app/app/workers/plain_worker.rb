# frozen_string_literal: true

class PlainWorker
  include JobQueue::Worker

  def perform(key, value)
    Entry.create!(kind: "plain", key: key, value: value)
  end
end
