# frozen_string_literal: true

module JobQueue
  # A queue (Sidekiq's `Sidekiq::Queue`): `JobQueue::Queue.new("mailers").size`.
  class Queue
    include Enumerable

    # Jobs read per round trip by `each`.
    PAGE_SIZE = 50
    # Jobs one search step reads (`find_job`, `page(filter:)`).
    WINDOW = 1000

    # Every known queue, by name.
    def self.all = API.shards.flat_map { |shard| API.engine(shard).api_queue_names.map { |name| new(name, shard: shard) } }

    attr_reader :name, :shard

    # `shard:` the shard the queue lives on (config.redis_shards); by default the one a
    # `JobQueue::Client.via` block picked, else "main".
    def initialize(name = "default", shard: nil)
      @name = name.to_s
      @shard = API.shard_for(shard)
    end

    # @api private: the engine of the queue's shard.
    def engine = API.engine(@shard)

    def size = engine.queue_size(name)

    # Names of the paused queues, sorted (one SMEMBERS).
    def self.paused_names = API.engine.api_paused_queues

    # Whether fetching from this queue is paused (pause!), for every process.
    def paused? = engine.api_paused_queues.include?(name)

    # Stops every server process fetching from this queue within a second; pushes go on and the jobs
    # wait. Sidekiq Pro's name. Returns true if it was running until now.
    def pause! = engine.api_queue_pause(name)

    # Lets every process fetch from it again. Returns true if it was paused until now.
    def unpause! = engine.api_queue_unpause(name)

    # Seconds the oldest job has waited.
    def latency = engine.api_queue_latency(name)

    # Each job, newest first, PAGE_SIZE per round trip; safe to `delete` jobs while iterating.
    def each
      return to_enum(:each) unless block_given?

      initial = size
      deleted = 0
      page = 0
      loop do
        jobs = engine.api_queue_page(name, [page * PAGE_SIZE - deleted, 0].max, PAGE_SIZE)
        break if jobs.empty?

        page += 1
        jobs.each { |json| yield JobRecord.new(json, name, shard: @shard) }
        deleted = initial - size
      end
    end

    # The job with this jid, or nil; searched in Redis WINDOW jobs per round trip.
    def find_job(jid)
      jid = jid.to_s
      return if jid.empty?

      offset = 0
      while offset
        offset, found = engine.api_queue_filter(name, jid, offset, WINDOW, WINDOW)
        found.each do |json, _index|
          record = JobRecord.new(json, name, shard: @shard)
          return record if record.jid == jid
        end
      end
      nil
    end

    # A page of jobs, newest first: `page(0, 25)`, or with `filter: "text"` (jobs whose JSON contains
    # it, such as a class name or a jid) searching at most `window` jobs from `offset`. Returns a Page.
    def page(offset = 0, count = 25, filter: nil, window: WINDOW)
      Page.build(offset, count, size, filter: filter, window: window,
        read: ->(from, n) { engine.api_queue_page(name, from, n) },
        search: ->(text, from, span, n) { engine.api_queue_filter(name, text, from, span, n) },
        wrap: ->(row) { JobRecord.new(row.is_a?(Array) ? row.first : row, name, shard: @shard) })
    end

    # Drops every job of the queue and forgets its name.
    def clear = engine.api_queue_clear(name)
    alias_method :💣, :clear

    def inspect = @shard == Shards::MAIN ? "#<#{self.class.name} #{name}>" : "#<#{self.class.name} #{name} shard=#{@shard}>"

    def to_s = name
  end
end
