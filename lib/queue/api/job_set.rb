# frozen_string_literal: true

module JobQueue
  # A sorted set of jobs by its Redis name (Sidekiq's `SortedSet`): size, scan, clear.
  class SortedSet
    include Enumerable

    attr_reader :name, :shard

    # `shard:` the shard whose set this is (config.redis_shards); by default the one a
    # `JobQueue::Client.via` block picked, else "main".
    def initialize(name, shard: nil)
      @name = name
      @shard = API.shard_for(shard)
      @_size = size
    end

    # @api private: the engine of this set's shard.
    def engine = API.engine(@shard)

    def size = engine.api_set_size(name)

    # Each entry whose JSON matches `match` (a substring, or a glob when it has a `*`), `count` per
    # ZSCAN step.
    def scan(match, count = 100)
      return to_enum(:scan, match, count) unless block_given?

      match = "*#{match}*" unless match.include?("*")
      cursor = 0
      loop do
        cursor, entries = engine.api_set_scan(name, match, cursor, count)
        entries.each { |json, score| yield SortedEntry.new(self, score, json) }
        break if cursor.zero?
      end
    end

    # Drops every job of the set.
    def clear = engine.api_set_clear(name)
    alias_method :💣, :clear
  end

  # The scheduled, retry and dead sets' common API (Sidekiq's `JobSet`).
  class JobSet < SortedSet
    # Entries read per round trip by `each`.
    PAGE_SIZE = 50
    # Entries one search step reads (`page(filter:)`).
    WINDOW = 1000

    # Adds a job (a Hash) to run, or to be shown, at `timestamp`.
    def schedule(timestamp, message) = engine.api_set_add(name, timestamp.to_f, JSON.generate(message))

    # Each entry, latest first, PAGE_SIZE per round trip; safe to act on entries while iterating.
    def each
      return to_enum(:each) unless block_given?

      initial = @_size
      page = 0
      loop do
        offset = [page * PAGE_SIZE - (initial - @_size), 0].max
        entries = engine.api_set_page(name, offset, PAGE_SIZE)
        break if entries.empty?

        page += 1
        entries.each { |json, score| yield SortedEntry.new(self, score, json) }
      end
    end

    # A page of entries, latest first: `page(0, 25)`, or with `filter: "text"` (entries whose JSON
    # contains it, such as a class name or a jid) searching at most `window` entries from `offset`.
    # Returns a Page.
    def page(offset = 0, count = 25, filter: nil, window: WINDOW)
      Page.build(offset, count, size, filter: filter, window: window,
        read: ->(from, n) { engine.api_set_page(name, from, n) },
        search: ->(text, from, span, n) { engine.api_set_filter(name, text, from, span, n) },
        wrap: ->((json, score)) { SortedEntry.new(self, score, json) })
    end

    # Entries at `score` (a Float or a Range of them), only job `jid`'s when given.
    def fetch(score, jid = nil)
      min, max = score.is_a?(Range) ? [score.first, score.last] : [score, score]
      engine.api_set_fetch(name, [min.to_f, max.to_f], jid&.to_s).map { |json, s| SortedEntry.new(self, s, json) }
    end

    # The entry of job `jid`, or nil: ZSCAN steps of 100 for members containing the jid.
    def find_job(jid)
      jid = jid.to_s
      return if jid.empty?

      scan(jid) { |entry| return entry if entry.jid == jid }
      nil
    end

    # Removes this exact member. Whether it was there.
    def delete_by_value(_name, value)
      removed = engine.api_set_delete(name, value)
      @_size -= 1 if removed
      removed
    end

    # Removes job `jid` scored `score`. Whether it was there.
    def delete_by_jid(score, jid)
      removed = engine.api_set_delete_by_jid(name, score.to_f, jid.to_s)
      @_size -= 1 if removed
      removed
    end
    alias_method :delete, :delete_by_jid
  end

  # Jobs pushed with `perform_in`/`perform_at`, by run-at time.
  class ScheduledSet < JobSet
    def initialize(shard: nil) = super("schedule", shard: shard)
  end

  # Failed jobs waiting for their next attempt, by retry time.
  class RetrySet < JobSet
    def initialize(shard: nil) = super("retry", shard: shard)

    # Every job back to its queue, one retry given back, 100 per atomic step. Returns how many moved.
    def retry_all = engine.api_set_act_all(name, "retry")

    # Every job to the dead set (death handlers are not run, as for a failure that is not retried).
    # Returns how many moved.
    def kill_all = engine.api_set_act_all(name, "kill")
  end

  # Jobs that will not be retried, by death time; bounded to `max_jobs` entries and `timeout` seconds.
  class DeadSet < JobSet
    def initialize(shard: nil) = super("dead", shard: shard)

    # Adds a job (its JSON) to the dead set now, trimmed as a failure trims it, and runs the death
    # handlers unless `notify_failure: false`.
    def kill(message, opts = {})
      engine.api_dead_bury(message)
      self.class.notify_death(JSON.parse(message)) if opts[:notify_failure] != false
      true
    end

    # Every job back to its queue, one retry given back, 100 per atomic step. Returns how many moved.
    def retry_all = engine.api_set_act_all(name, "retry")

    def self.max_jobs = 10_000

    def self.timeout = 180 * 24 * 60 * 60

    # Runs the configured death handlers for a job killed through this API.
    def self.notify_death(job)
      error = RuntimeError.new("Job killed by API")
      error.set_backtrace(caller)
      JobQueue.config.death_handlers.each { |handler| handler.call(job, error) }
    end
  end
end
