# frozen_string_literal: true

# Workers for spec/compat/sidekiq7_real_spec.rb, the same classes under both servers: loaded by the
# real Sidekiq 7.3.10 (its CLI's `-r`, or spec/support/sidekiq7_eval.rb, with Sidekiq already
# required from SIDEKIQ7_SRC) and by exe/queue (no sidekiq gem at all). Each job records what it did
# in Redis through its own server's `redis` (redis-client under Sidekiq 7, the redis gem under queue).
require "json"

SIDEKIQ7 = defined?(Sidekiq::VERSION) && Sidekiq::VERSION.start_with?("7")

if SIDEKIQ7
  Sidekiq.configure_server { |c| c.redis = {url: ENV.fetch("REDIS_URL")} }
  Sidekiq.configure_client { |c| c.redis = {url: ENV.fetch("REDIS_URL")} }
  PeerRunner = "sidekiq #{Sidekiq::VERSION}"
  PeerJob = Sidekiq::Job
  PeerIterableJob = Sidekiq::IterableJob
  def peer_redis(&block) = Sidekiq.redis(&block)
else
  require "queue"
  JobQueue.configure { |c| c.redis = {url: ENV.fetch("REDIS_URL")} }
  PeerRunner = "queue #{JobQueue::VERSION}"
  # A second capsule, for Sidekiq 7's view of a process with capsules.
  JobQueue.config.capsule("single") { |c| c.concurrency = 1 }.queues = %w[single] if ENV["PEER_CAPSULE"]
  PeerJob = JobQueue::Worker
  PeerIterableJob = JobQueue::IterableJob
  def peer_redis(&block) = JobQueue.redis(&block)
end

# Both clients answer `call("RPUSH", …)`.
def peer_record(list, fields)
  peer_redis { |c| c.call("RPUSH", list, JSON.generate(fields.merge("runner" => PeerRunner, "pid" => Process.pid))) }
end

class Sk7Echo
  include PeerJob

  def perform(*args)
    peer_record("s7:ran", "jid" => jid, "args" => args, "job_class" => self.class.name)
  end
end

# Runs until `s7:release` exists (at most 30 s), so a dashboard can see it busy.
class Sk7Slow
  include PeerJob

  def perform(name)
    peer_record("s7:started", "jid" => jid, "name" => name)
    deadline = Time.now + 30
    sleep 0.02 until peer_redis { |c| c.call("EXISTS", "s7:release") } == 1 || Time.now > deadline
    peer_record("s7:ran", "jid" => jid, "args" => [name], "job_class" => self.class.name)
  end
end

# Iterates over `count` items, `delay` seconds each, recording each item with its runner.
class Sk7Iterable
  include PeerIterableJob

  def build_enumerator(name, count, _delay, cursor:)
    peer_record("s7:built:#{name}", "cursor" => cursor)
    array_enumerator((0...count).to_a, cursor: cursor)
  end

  def each_iteration(item, name, _count, delay)
    sleep delay
    peer_record("s7:items:#{name}", "item" => item)
  end

  def on_complete
    peer_record("s7:done:#{arguments.first}", {})
  end
end
