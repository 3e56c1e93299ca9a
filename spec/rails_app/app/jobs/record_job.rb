# frozen_string_literal: true

class RecordJob < ApplicationJob
  queue_as :mailers

  def perform(key, value)
    Entry.create!(kind: "active_job", key: key, value: value)
  end
end
