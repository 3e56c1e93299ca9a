# frozen_string_literal: true

# `bin/rails runner script/enqueue.rb`: creates the table, then enqueues one job of each kind.
ActiveRecord::Schema.verbose = false
load Rails.root.join("db", "schema.rb")

PlainWorker.perform_async("p1", 1)
IdempotentWorker.perform_async("i1", 2)
IdempotentWorker.perform_async("i1", 2) # a duplicate, dropped while the first is queued
OrderedWorker.perform_async([{id: "o1", payload: {"n" => 1}}, {id: "o1", payload: {"n" => 2}, score: Time.now.to_f + 1}])
RecordJob.perform_later("a1", 3)
RecordJob.set(wait: 1).perform_later("a2", 4)
FlakyJob.perform_later("f1")
DoomedJob.perform_later("d1")
puts "enqueued; scheduled: #{JobQueue.stats["scheduled_size"]}"
