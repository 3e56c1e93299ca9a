# frozen_string_literal: true

# Lowkiq-style: each id's payloads in order, never two runs of one id at once.
module OrderedWorker
  extend JobQueue::OrderedWorker
  self.shards_count = 2

  def self.perform(payloads_by_id)
    held = Entry.connection_held? # at the start of the batch, before its first write
    payloads_by_id.each do |id, payloads|
      payloads.each { |payload| Entry.write!("ordered", id, payload["n"], held: held) }
    end
  end
end
