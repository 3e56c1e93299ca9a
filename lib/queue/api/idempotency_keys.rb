# frozen_string_literal: true

module JobQueue
  # The idempotency keys held now (GitLab-style deduplication, README "Deduplication"): while one is
  # held, a push of the same job with the same arguments is dropped (or marked). Redis indexes them
  # nowhere, so they are found by walking the keyspace with `SCAN … MATCH … COUNT`, one bounded step
  # per call:
  #
  #   keys = JobQueue::IdempotencyKeys.new            # or .new(queue: "mailers")
  #   step = keys.scan(0, count: 100)                 # examines about 100 keys of the keyspace
  #   step.entries.each { |k| puts "#{k.queue} #{k.jid} #{k.ttl}" }
  #   step = keys.scan(step.cursor) unless step.last? # …and so on
  #   keys.each { |k| k.delete if k.queue == "stale" } # the whole walk, step by step
  #
  # A step may find nothing and still not be the last: continue from its cursor. A key may show up
  # twice in a walk (Redis's SCAN guarantee is "at least once").
  class IdempotencyKeys
    include Enumerable

    COUNT = 100
    MAX_COUNT = 1000

    # One step of the walk: the keys it found, and the cursor to continue from (0: the walk is over).
    Step = Struct.new(:entries, :cursor) do
      include Enumerable

      def each(&block) = entries.each(&block)

      def size = entries.size

      def last? = cursor.zero?
    end

    # Releases `key` by hand (the next push of its job is not a duplicate), only while job `jid` holds
    # it when given. Whether it was held.
    def self.release(key, jid: nil) = API.engine.api_dedup_release(key.to_s, jid&.to_s)

    attr_reader :queue

    # `queue`: only the keys of that queue's jobs.
    def initialize(queue: nil)
      @queue = queue&.to_s
    end

    # One SCAN step from `cursor` (0 to start) examining about `count` keys (1 to MAX_COUNT): a Step.
    def scan(cursor = 0, count: COUNT)
      API.count!("cursor", cursor)
      raise ArgumentError, "count must be an Integer from 1 to #{MAX_COUNT}, got #{count.inspect}" unless count.is_a?(Integer) && count.between?(1, MAX_COUNT)

      following, rows = API.engine.api_dedup_keys(cursor, count, queue)
      Step.new(rows.map { |key, q, jid, ttl_ms| IdempotencyKey.new(key, q, jid, ttl_ms.negative? ? nil : ttl_ms / 1000.0) }, following)
    end

    # Every key held, walking the whole keyspace COUNT keys per round trip (its cost grows with the
    # keyspace; `scan` is the bounded call).
    def each
      return to_enum(:each) unless block_given?

      cursor = 0
      loop do
        step = scan(cursor)
        step.each { |k| yield k }
        break if step.last?

        cursor = step.cursor
      end
    end

    def inspect = "#<#{self.class.name}#{" #{queue}" if queue}>"
  end

  # One idempotency key: `key` (the whole Redis key), `queue` (of the jobs it deduplicates; the worker
  # is part of the hashed digest), `jid` (the job holding it), `ttl` (seconds left, nil for none).
  IdempotencyKey = Struct.new(:key, :queue, :jid, :ttl) do
    # When it expires, or nil.
    def expires_at = ttl && Time.now + ttl

    # Releases the key, only if this job still holds it. Whether it did.
    def delete = IdempotencyKeys.release(key, jid: jid)

    def to_h = {"key" => key, "queue" => queue, "jid" => jid, "ttl" => ttl}
  end
end
