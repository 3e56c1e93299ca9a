# frozen_string_literal: true

# `bin/rails runner script/embedded.rb`: a Rails process that is not `bundle exec queue` (as a Puma
# worker is not) runs an embedded server, enqueues 4 plain jobs and waits for their rows. With
# DATABASE_POOL=1 and 2 threads, a job thread that kept its connection would starve the other.
ActiveRecord::Schema.verbose = false
load Rails.root.join("db", "schema.rb")
ActiveRecord::Base.connection_pool.release_connection # the pool's one connection is the jobs'

embedded = JobQueue.configure_embed { |config| config.concurrency = 2 }
embedded.run
4.times { |i| PlainWorker.perform_async("e#{i}", i) }
deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 30
until ActiveRecord::Base.connection_pool.with_connection { Entry.where(kind: "plain").count } == 4
  raise "the 4 jobs did not all run within 30 s" if Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline

  sleep 0.05 # polling the table: the jobs' rows are the event
end
puts "embedded stopped, #{embedded.stop} requeued"
