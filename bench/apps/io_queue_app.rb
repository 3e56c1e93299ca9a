# frozen_string_literal: true

# The app bench/io_bound.rb runs under our server: a job that sleeps its one argument (seconds), as a
# job waiting on a database or an HTTP call does, then counts itself (blank_counter.rb).
require_relative "queue_config"
require_relative "blank_counter"

class IoSleepJob
  include JobQueue::Worker

  def perform(seconds)
    sleep seconds
    BlankCounter.tick
  end
end
