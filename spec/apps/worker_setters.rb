# frozen_string_literal: true

# App for spec/api/worker_setters_spec.rb: a worker that takes its jid and bid through
# JobQueue::Worker's own accessors, and one whose own setters must be called.
require_relative "basic"

class StockSettersJob
  include JobQueue::Worker

  def perform(label)
    Record.redis.rpush("seen", JSON.generate([label, jid, bid, instance_variable_get(:@jid)]))
  end
end

class OwnSettersJob
  include JobQueue::Worker

  def jid=(value)
    super("own-#{value}")
  end

  def bid=(value)
    @bid_calls = (@bid_calls || 0) + 1
    super
  end

  def perform(label)
    Record.redis.rpush("seen", JSON.generate([label, jid, bid, @bid_calls]))
  end
end

# Workers made otherwise than by a bare allocation: the engine calls their `initialize` or `new`.
class InitializeJob
  include JobQueue::Worker

  def initialize
    super
    @made = "initialize"
  end

  def perform(label)
    Record.redis.rpush("made", JSON.generate([label, @made, jid]))
  end
end

class CustomNewJob
  include JobQueue::Worker

  def self.new(*)
    super.tap { |worker| worker.instance_variable_set(:@made, "new") }
  end

  def perform(label)
    Record.redis.rpush("made", JSON.generate([label, @made, jid]))
  end
end

class PlainJob
  include JobQueue::Worker

  def perform(label)
    Record.redis.rpush("made", JSON.generate([label, instance_variables.sort, jid]))
  end
end
