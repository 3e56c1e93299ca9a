# frozen_string_literal: true

# Iterable jobs for server-process specs. Each records in Redis, under its `name` argument, every item
# it ran (`it:runs:<name>`, item => times), how many (`it:count:<name>`), the cursor each run built its
# enumerator from (`it:built:<name>`) and its callbacks in order (`it:events:<name>`).
require_relative "basic"

class IterableArrayJob
  include JobQueue::IterableJob

  # count items, each taking `delay` seconds.
  def build_enumerator(name, count, delay, cursor:)
    Record.redis.rpush("it:built:#{name}", JSON.generate("cursor" => cursor, "pid" => Process.pid))
    array_enumerator(Array.new(count) { |i| "item-#{i}" }, cursor: cursor)
  end

  def each_iteration(item, name, _count, delay)
    sleep delay if delay.positive?
    Record.redis.hincrby("it:runs:#{name}", item, 1)
    Record.redis.incr("it:count:#{name}")
  end

  %i[on_start on_resume on_stop on_cancel on_complete].each do |callback|
    define_method(callback) { Record.redis.rpush("it:events:#{arguments.first}", callback.to_s) }
  end

  def around_iteration
    Record.redis.incr("it:around:#{arguments.first}")
    yield
  end
end

# Cancels itself (the instance's cancel!) at item `at`; the next state write, within 5 s, stops it.
class IterableSelfCancellingJob
  include JobQueue::IterableJob

  def build_enumerator(name, at, cursor:)
    array_enumerator((0...1000).to_a, cursor: cursor)
  end

  def each_iteration(item, name, at)
    sleep 0.01
    Record.redis.incr("it:count:#{name}")
    Record.redis.set("it:cancelled_at:#{name}", cancel!) if item == at
  end

  def on_cancel
    Record.redis.rpush("it:events:#{arguments.first}", "on_cancel")
  end

  def on_complete
    Record.redis.rpush("it:events:#{arguments.first}", "on_complete")
  end
end

# Fails once at item `at` (while `it:fail:<name>` exists), then retries a second later.
class IterableFailingOnceJob
  include JobQueue::IterableJob
  sidekiq_retry_in { 1 }

  def build_enumerator(name, count, _at, cursor:)
    Record.redis.rpush("it:built:#{name}", JSON.generate("cursor" => cursor, "pid" => Process.pid))
    array_enumerator(Array.new(count) { |i| "item-#{i}" }, cursor: cursor)
  end

  def each_iteration(item, name, _count, at)
    raise ArgumentError, "failing at #{item}" if item == "item-#{at}" && Record.redis.del("it:fail:#{name}") == 1

    Record.redis.hincrby("it:runs:#{name}", item, 1)
  end

  def on_complete = Record.redis.rpush("it:events:#{arguments.first}", "on_complete")
end
