# frozen_string_literal: true

# Lowkiq-style: each id's payloads in order, never two runs of one id at once.
module OrderedWorker
  extend JobQueue::OrderedWorker
  self.shards_count = 2

  def self.perform(payloads_by_id)
    payloads_by_id.each do |id, payloads|
      payloads.each { |payload| Entry.create!(kind: "ordered", key: id, value: payload["n"]) }
    end
  end
end
