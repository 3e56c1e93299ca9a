# frozen_string_literal: true

class RecordJob < ApplicationJob
  queue_as :mailers

  def perform(key, value)
    Entry.write!("active_job", key, value)
  end
end
