# frozen_string_literal: true

module JobQueue
  # Pushes jobs in Sidekiq's format.
  #
  #   JobQueue::Client.push("class" => HardWorker, "args" => [1, "two"])
  #   JobQueue::Client.push_bulk("class" => HardWorker, "args" => [[1], [2], [3]])
  #
  # A job with "at" (epoch seconds) in the future goes to the schedule; otherwise it is enqueued at
  # once. Client middleware runs for every job and may change it, or stop it by not yielding. Every
  # call is one round trip to Redis (bulk pushes: one per 1,000 jobs).
  class Client
    BULK_SLICE = 1000

    def self.push(item)
      new.push(item)
    end

    def self.push_bulk(items)
      new.push_bulk(items)
    end

    # Sidekiq Pro's `Sidekiq::Client.via(pool)`, by shard name: every push in the block goes to shard
    # `name` (config.redis_shards), whatever its worker's `store`, and the Ruby API reads that shard.
    # Thread-local; nests, and restores the outer shard on the way out. Returns the block's value.
    def self.via(name, &block)
      Shards.via(name, &block)
    end

    def initialize(config = JobQueue.config)
      @config = config
    end

    # Sidekiq 7.3's `Client#cancel!(jid)`: marks an iterable job cancelled in its `it-<jid>` hash and
    # returns the epoch second it was (the first call's). Asynchronous: a running job notices it within
    # Iterable::STATE_FLUSH_INTERVAL seconds, a queued one when it starts. Written by the engine.
    def cancel!(jid)
      Iterable::State.cancel!(jid)
    end

    # Returns the job's jid, or nil if a middleware stopped it or it was dropped as a duplicate.
    def push(item)
      job = prepare(item) or return nil
      raw_push([job], worker_class_of(item)).empty? ? job["jid"] : nil
    end

    # The job hash a push would write (normalized, with its worker context, through client
    # middleware), or nil if a middleware stopped it. Used by #push and `perform_inline`.
    def prepare(item)
      raise ArgumentError, "job must be a Hash, got #{item.class}" unless item.is_a?(Hash)

      job = Expiry.stamp!(normalize(item))
      worker_class = worker_class_of(item)
      Context.stamp(job, worker_class) # "meta.*" worker context (context.rb)
      run_middleware(worker_class, job)
    end

    # `perform_async`: the job built and queued by the engine in one call when nothing in Ruby needs
    # to see it (DirectPush), else #push. Returns the jid, or nil if the job was not queued.
    def push_args(worker_class, args)
      return push_batch_args(worker_class, [args])&.first || push("class" => worker_class, "args" => args) if Batch.current

      template = direct_push? && worker_class.push_template
      if template
        flag = template.deduplicated ? feature_flag(template.queue) : nil
        pushed = (template.store ? engine_for(template.store) : @config.engine).push_new(template.native, args, flag)
        return pushed || nil unless pushed.nil?
      end
      push("class" => worker_class, "args" => args)
    end

    # `perform_bulk`'s common case, as #push_args: the engine builds and queues each slice of up to
    # BULK_SLICE jobs in one call when nothing in Ruby needs to see them; a slice holding an argument
    # it does not write (or an entry that is not an Array) takes #push_bulk, with the same result.
    # Returns the jids of the jobs queued.
    def push_bulk_args(worker_class, args_list)
      if Batch.current && args_list.is_a?(Array)
        return args_list.each_slice(BULK_SLICE).flat_map do |slice|
          push_batch_args(worker_class, slice) || push_bulk("class" => worker_class, "args" => slice)
        end
      end
      template = direct_push? && args_list.is_a?(Array) && worker_class.push_template
      return push_bulk("class" => worker_class, "args" => args_list) unless template

      flag = template.deduplicated ? feature_flag(template.queue) : nil
      args_list.each_slice(BULK_SLICE).flat_map do |slice|
        engine_for(template.store).push_bulk_new(template.native, slice, flag) || push_bulk("class" => worker_class, "args" => slice)
      end
    end

    # Jobs of the running `Batch#jobs` block built and queued by the engine with the batch's bid,
    # counted in the same MULTI; nil when they must take the Ruby path (which adds the bid too).
    def push_batch_args(worker_class, args_list)
      template = direct_push? && worker_class.push_template
      return nil if !template || template.deduplicated

      batch_engine(template.store).batch_push_new(Batch.current.bid, template.native, args_list)
    end

    # Sidekiq 8's floor on "spread_interval": the scheduler's poll interval there.
    MIN_SPREAD = 5

    # Epoch times for `count` jobs spread at random over the next `interval` seconds (at least
    # MIN_SPREAD), as Sidekiq 8's `spread_interval` picks them.
    def self.spread_times(interval, count)
      unless interval.is_a?(Numeric) && interval.positive?
        raise ArgumentError, "spread_interval must be a positive number of seconds, got #{interval.inspect}"
      end

      span = [interval, MIN_SPREAD].max
      now = Time.now.to_f
      Array.new(count) { now + rand * span }
    end

    # `items` holds "class", "args" (an Array of argument Arrays), and optionally "at" (one time, or
    # one per job: a Time or epoch seconds) or "spread_interval" (seconds: Sidekiq 8's random times
    # over that window), and any job option. The options are checked once; each job gets its own jid.
    # Returns the jids of the jobs pushed.
    def push_bulk(items)
      items = stringify(items)
      args_list = items.delete("args")
      raise ArgumentError, "push_bulk needs \"args\" as an Array of Arrays" unless args_list.is_a?(Array) && args_list.all?(Array)
      raise ArgumentError, "push_bulk cannot take one \"jid\" for many jobs" if items.key?("jid") && args_list.size > 1

      ats = bulk_times(items, args_list.size)
      batch_size = items.delete("batch_size")
      return push_batches(items, args_list, ats, batch_size) if batch_size

      if ats.is_a?(Array) && ats.size != args_list.size
        raise ArgumentError, "push_bulk: \"at\" has #{ats.size} times for #{args_list.size} jobs"
      end

      worker_class = items["class"]
      base = normalize(items.merge("args" => []))
      base.delete("jid") unless items.key?("jid")
      now = Time.now.to_f
      jobs = args_list.each_with_index.filter_map do |args, i|
        JsonArgs.check!(args, base["class"])
        job = base.merge("args" => args)
        job["jid"] ||= SecureRandom.hex(12)
        Context.stamp(job, worker_class) # "meta.*" worker context (context.rb)
        at = epoch(ats.is_a?(Array) ? ats[i] : ats)
        job["at"] = at if at && at > now
        Expiry.stamp!(job)
        run_middleware(worker_class, job)
      end
      dropped = raw_push(jobs, worker_class)
      (dropped.empty? ? jobs : jobs - dropped).map { |j| j["jid"] }
    end

    private

    # Sidekiq's "batch_size" (jobs per round trip): each slice pushed on its own.
    def push_batches(items, args_list, ats, batch_size)
      unless batch_size.is_a?(Integer) && batch_size.positive?
        raise ArgumentError, "push_bulk: \"batch_size\" must be a positive Integer, got #{batch_size.inspect}"
      end
      if ats.is_a?(Array) && ats.size != args_list.size
        raise ArgumentError, "push_bulk: \"at\" has #{ats.size} times for #{args_list.size} jobs"
      end

      args_list.each_slice(batch_size).with_index.flat_map do |slice, n|
        at = ats.is_a?(Array) ? ats[n * batch_size, slice.size] : ats
        push_bulk(items.merge("args" => slice, "at" => at).compact)
      end
    end

    # "at" or "spread_interval" (taken out of `items`) as one time, one per job, or nil.
    def bulk_times(items, count)
      ats = items.delete("at")
      spread = items.delete("spread_interval")
      return ats if spread.nil?
      raise ArgumentError, "push_bulk takes \"at\" or \"spread_interval\", not both" unless ats.nil?

      Client.spread_times(spread, count)
    end

    # The job hash as it is stored: the worker's options under the caller's, class and queue as
    # strings, a jid and created_at. Arguments are checked to be JSON-native.
    def normalize(item)
      klass = item["class"] || item[:class]
      unless klass.is_a?(Class) || (klass.is_a?(String) && !klass.empty?)
        raise ArgumentError, "job needs a \"class\" (a worker class or its name): #{item.inspect[0, 200]}"
      end

      job = (klass.respond_to?(:get_sidekiq_options) ? klass.get_sidekiq_options : @config.default_job_options).dup
      item.each { |key, value| job[key.to_s] = value }
      raise ArgumentError, "job \"args\" must be an Array: #{item.inspect[0, 200]}" unless job["args"].is_a?(Array)

      job["class"] = klass.is_a?(Class) ? class_name(klass) : klass
      job["queue"] = job["queue"].to_s
      raise ArgumentError, "job needs a queue name" if job["queue"].empty?

      JsonArgs.check!(job["args"], job["class"])
      job["bid"] ||= Batch.current&.bid if Batch.current # joins the batch whose jobs block runs
      job["jid"] ||= SecureRandom.hex(12)
      job["created_at"] ||= Time.now.to_f
      if job.key?("at")
        at = epoch(job["at"])
        at && at > Time.now.to_f ? job["at"] = at : job.delete("at")
      end
      job
    end

    # A server finds the worker by this name, so an anonymous class cannot be enqueued.
    def class_name(klass)
      klass.name or raise ArgumentError, "an anonymous class cannot be enqueued: a server could not find it by name"
    end

    # "at" as epoch seconds: given as a Numeric (epoch seconds) or a Time; nil when absent. One that
    # is not in the future means "now", as in Sidekiq.
    def epoch(at)
      case at
      when nil then nil
      when Time then at.to_f
      when Numeric then at
      else raise ArgumentError, "job \"at\" must be a Time or Numeric epoch seconds, got #{at.inspect}"
      end
    end

    # Middleware gets the worker class as the caller gave it (a Class from `perform_async`, or a
    # String), as Sidekiq passes it, and a redis pool that answers `with` (redis_pool.rb).
    def run_middleware(worker_class, job)
      return job if @config.client_middleware_chain.empty?

      pushed = nil
      @config.client_middleware_chain.invoke(worker_class, job, job["queue"], @config.redis_pool) { pushed = job }
      pushed
    end

    # Whether a job may skip the Ruby-side steps that could change it: no client middleware and no
    # thread's worker context. JobQueue::Testing's modes say no too.
    def direct_push?
      return false unless @config.client_middleware_chain.empty?

      context = Thread.current[Context::THREAD_KEY]
      context.nil? || context.empty?
    end

    # The engine a job of shard `store` (its worker's `store` option; nil for "main") goes to: the
    # shard of an enclosing `via` block wins, as Sidekiq Pro's does over a worker's pool. Without
    # config.redis_shards every store is "main" (routing rules written for several shards work on
    # one Redis); with them, an unknown store raises naming the known ones.
    # A batch and its jobs live on one shard, the batch's: "main", or the shard of the `via` block it
    # was created in. A job whose worker's `store` names another shard cannot join it.
    def batch_engine(store)
      engine = @config.engine
      return engine if store.nil? || !@config.shards.many? || engine_for(store).equal?(engine)

      raise ArgumentError, "a job stored on shard #{store.inspect} cannot join a batch on shard #{(Shards.current || Shards::MAIN).inspect}: " \
                           "a batch and its jobs live on one shard; create the batch inside JobQueue::Client.via(#{store.inspect})"
    end

    def engine_for(store)
      return @config.engine if store.nil? || Thread.current[Shards::VIA_KEY] || !@config.shards.many?

      @config.shard_engine(store)
    end

    def worker_class_of(item)
      item.key?("class") ? item["class"] : item[:class]
    end

    NOTHING_DROPPED = [].freeze
    private_constant :NOTHING_DROPPED

    # Writes jobs the middleware let through (a scheduled one still has its "at") to Redis, and
    # returns those dropped as duplicates. The one place jobs leave the client: JobQueue::Testing
    # replaces it in its fake and inline modes.
    def raw_push(jobs, worker_class)
      if (dedup = deduplication(worker_class, nil))
        return push_with_deduplication(jobs, dedup, worker_class)
      end

      jobs.size == 1 ? write_one(jobs.first) : write(jobs)
      NOTHING_DROPPED
    end

    def write_one(job)
      return write([job]) if job["bid"] # counted in its batch (batch.rb)

      engine = engine_for(job["store"])
      if job.key?("at")
        at = job.delete("at")
        engine.schedule([[at.to_f, JSON.generate(job)]])
      else
        job["enqueued_at"] = Timestamp.for_job(job, Time.now.to_f)
        engine.push(job["queue"], [JSON.generate(job)])
      end
    end

    # Jobs carrying a "bid" are queued and counted in their batch in one atomic step.
    def write(jobs)
      return if jobs.empty?

      return jobs.group_by { |j| j["store"] }.each_value { |group| write(group) } if jobs.any? { |j| j["store"] != jobs.first["store"] }

      engine = jobs.first["bid"] ? batch_engine(jobs.first["store"]) : engine_for(jobs.first["store"])
      scheduled, now = jobs.partition { |j| j.key?("at") }
      scheduled.group_by { |j| j["bid"] }.each do |bid, group|
        group.each_slice(BULK_SLICE) do |slice|
          entries = slice.map { |j| [j.delete("at").to_f, JSON.generate(j)] }
          bid ? engine.batch_schedule(bid.to_s, entries) : engine.schedule(entries)
        end
      end
      enqueued_at = Time.now.to_f
      now.group_by { |j| [j["queue"], j["bid"]] }.each do |(queue, bid), group|
        group.each_slice(BULK_SLICE) do |slice|
          jsons = slice.map { |j| j["enqueued_at"] = Timestamp.for_job(j, enqueued_at); JSON.generate(j) }
          bid ? engine.batch_push(bid.to_s, queue, jsons) : engine.push(queue, jsons)
        end
      end
    end

    # Jobs of a worker with deduplication: those it applies to (immediate ones, scheduled ones with
    # `including_scheduled`) go through the engine's check-and-push, the rest are written as usual.
    # Returns the dropped duplicates.
    def push_with_deduplication(jobs, dedup, worker_class)
      deduplicated, plain = jobs.partition { |j| deduplication(worker_class, j) }
      write(plain)
      batched = deduplicated.group_by { |j| j["bid"] }.transform_values(&:size)
      batched.each { |bid, n| @config.engine.batch_adjust(bid.to_s, n) if bid } # counted first (batch.rb)
      pushed = deduplicated.group_by { |j| [j["queue"], j["store"]] }.flat_map { |_, group| push_deduplicated(group, dedup, worker_class) }
      dropped = deduplicated - pushed
      dropped.group_by { |j| j["bid"] }.each { |bid, group| @config.engine.batch_adjust(bid.to_s, -group.size) if bid }
      dropped
    end

    # The worker's deduplication options when `job` (if given) is to be deduplicated: immediate, or
    # scheduled with `including_scheduled: true`. Nil for workers without deduplication.
    def deduplication(worker_class, job)
      return nil unless worker_class.respond_to?(:deduplication_push_options)

      dedup = worker_class.deduplication_push_options or return nil
      return dedup if job.nil? || !job.key?("at") || worker_class.deduplicate_including_scheduled?

      nil
    end

    # Jobs of one worker and queue with deduplication, one round trip per slice; returns the jobs
    # that were pushed (dropped duplicates are left out).
    def push_deduplicated(jobs, dedup, worker_class)
      queue = jobs.first["queue"]
      flag = feature_flag(queue)
      enqueued_at = Time.now.to_f
      jobs.each_slice(BULK_SLICE).flat_map do |slice|
        outcomes = engine_for(jobs.first["store"]).push_dedup(queue, slice.map { |job| dedup_entry(job, worker_class, enqueued_at) }, dedup, flag)
        slice.zip(outcomes).reject { |_, outcome| outcome && outcome[0] == :dropped }.map(&:first)
      end
    end

    # What the engine pushes for one job: jid, JSON, the JSON of the arguments to hash, run-at.
    def dedup_entry(job, worker_class, enqueued_at)
      at = job.delete("at")
      job["enqueued_at"] = Timestamp.for_job(job, enqueued_at) unless at
      [job["jid"].to_s, JSON.generate(job), idempotency_args(worker_class, job["args"]), at&.to_f]
    end

    # Whether `disable_<queue>_deduplication` is on, from `config.feature_flag`; nil has the engine
    # read the flag in Redis, inside the push (the default flags).
    def feature_flag(queue)
      callable = @config.feature_flag
      return nil if callable.is_a?(FeatureFlags)

      !!callable.call("disable_#{queue}_deduplication")
    end

    def idempotency_args(worker_class, args)
      args = worker_class.idempotency_arguments(args) if worker_class.respond_to?(:idempotency_arguments)
      JSON.generate(args)
    end

    def stringify(hash)
      raise ArgumentError, "job must be a Hash, got #{hash.class}" unless hash.is_a?(Hash)

      hash.transform_keys(&:to_s)
    end
  end
end
