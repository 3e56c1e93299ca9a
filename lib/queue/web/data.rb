# frozen_string_literal: true

require_relative "../api"

module JobQueue
  class Web
    # What the pages read and change, in one place, over the Ruby inspection API (`queue/api`:
    # JobQueue::Stats, Queue, ScheduledSet/RetrySet/DeadSet, ProcessSet, Workers, OrderedQueue,
    # IdempotencyKeys) and JobQueue::Ordered. Every call is a bounded number of engine calls: a page
    # of a set (or a SCAN step), never the set.
    module Data
      SETS = {"scheduled" => :ScheduledSet, "retries" => :RetrySet, "dead" => :DeadSet}.freeze

      module_function

      def stats
        s = JobQueue::Stats.new
        {"processed" => s.processed, "failed" => s.failed, "enqueued" => s.enqueued,
         "scheduled_size" => s.scheduled_size, "retry_size" => s.retry_size, "dead_size" => s.dead_size,
         "processes_size" => s.processes_size, "workers_size" => s.workers_size,
         "default_queue_latency" => s.default_queue_latency}
      end

      # {"processed" => [[date, count], …], "failed" => …}, oldest day first.
      def history(days)
        h = JobQueue::Stats::History.new(days)
        {"processed" => h.processed.to_a.reverse, "failed" => h.failed.to_a.reverse}
      end

      # Every known queue, and every paused one even if it never had a push (so it can be unpaused).
      def queues
        paused = JobQueue::Queue.paused_names
        names = (JobQueue::Queue.all.map(&:name) | paused).sort
        names.map { |name| queue_info(JobQueue::Queue.new(name), paused) }
      end

      def queue(name) = queue_info(JobQueue::Queue.new(name), JobQueue::Queue.paused_names)

      def queue_info(q, paused)
        {name: q.name, size: q.size, latency: q.latency, paused: paused.include?(q.name)}
      end

      def pause_queue(name) = JobQueue::Queue.new(name).pause!

      # Every cron schedule, by name (one read of each: an app has tens of schedules, not millions).
      def cron_jobs = JobQueue::Cron::Job.all.map { |job| cron_info(job) }

      def cron_job(name)
        job = JobQueue::Cron::Job.find(name.to_s)
        job && cron_info(job)
      end

      def cron_info(job)
        next_time = begin
          job.enabled? ? job.next_time : nil
        rescue ArgumentError
          nil # a cron string another tool stored that we cannot read; the server skips it too
        end
        {name: job.name, cron: job.cron, klass: job.klass, queue: job.queue, description: job.description,
         status: job.status, enabled: job.enabled?, catch_up: job.catch_up?, last: job.last_enqueue_time,
         next: next_time, history: job.jid_history}
      end

      def unpause_queue(name) = JobQueue::Queue.new(name).unpause!

      # A page of a queue's jobs (JobRecords), the newest first.
      def queue_page(name, offset, count)
        JobQueue::Queue.new(name).page(offset, count).entries
      end

      # Deletes the job whose JSON is `value` (as the page showed it). Whether it was there.
      def delete_queued(name, value)
        JobQueue::JobRecord.new(value, name).delete
      end

      def clear_queue(name) = JobQueue::Queue.new(name).clear

      def processes
        JobQueue::ProcessSet.new.map { |p| process_info(p) }
      end

      def process_info(p)
        %w[identity hostname pid tag concurrency busy rss beat quiet started_at queues labels version]
          .to_h { |k| [k, k == "identity" ? p.identity : p[k]] }
      end

      # [[identity, thread, work], …]
      def work
        JobQueue::Workers.new.map { |identity, thread, work| [identity, thread, work] }
      end

      def work_size = JobQueue::Workers.new.size

      def signal(identity, kind)
        process = JobQueue::ProcessSet.new.find { |p| p.identity == identity } or return false
        kind == :quiet ? process.quiet! : process.stop!
        true
      end

      def signal_all(kind)
        JobQueue::ProcessSet.new.count do |p|
          kind == :quiet ? p.quiet! : p.stop!
          true
        end
      end

      def set(kind) = JobQueue.const_get(SETS.fetch(kind)).new

      def set_size(kind) = set(kind).size

      # A JobQueue::Page of a set, latest first; with a filter, the entries whose JSON contains it (a
      # class or a jid), searched a bounded window at a time from `offset` (the page's `next_offset`
      # continues the search).
      def set_page(kind, offset, count, filter = "")
        set(kind).page(offset, count, filter: filter.empty? ? nil : filter)
      end

      # The name of an entry in URLs and forms: "SCORE-JID".
      def key(entry) = "#{entry.score}-#{entry.jid}"

      # The entry named "SCORE-JID", or nil.
      def set_entry(kind, key)
        score, jid = key.to_s.split("-", 2)
        return nil unless jid && score.match?(/\A\d+(\.\d+)?(e[+-]?\d+)?\z/)

        set(kind).fetch(score.to_f, jid).first
      end

      # Applies retry, delete or kill to the entries named; returns how many it found.
      def set_act(kind, keys, action)
        keys.count do |key|
          entry = set_entry(kind, key) or next false
          case action
          when "retry" then kind == "scheduled" ? entry.add_to_queue : entry.retry
          when "delete" then entry.delete
          when "kill" then entry.kill
          end
          true
        end
      end

      # Applies an action to the whole set; returns how many jobs it reached.
      def set_all(kind, action)
        s = set(kind)
        case action
        when "retry" then s.retry_all
        when "kill" then s.kill_all
        when "delete" then s.size.tap { s.clear }
        end
      end

      def ordered_stats = JobQueue::Ordered.stats

      # Each loaded ordered worker's queue: Lowkiq's numbers and every shard with its owner, one engine
      # call for the numbers and one per queue for its shards (bounded by the shard counts).
      def ordered_queues
        by_worker = ordered_stats.fetch("by_worker")
        JobQueue::OrderedQueue.all.map do |q|
          numbers = by_worker.fetch(q.name, {})
          {"name" => q.name, "queue" => q.queue_name, "shards_count" => q.shards_count,
           "length" => numbers["length"], "lag" => numbers["lag"], "morgue_length" => numbers["morgue_length"],
           "shards" => q.shards.map(&:to_h)}
        end
      end

      # One SCAN step of the idempotency keys held (JobQueue::IdempotencyKeys::Step): the keys found
      # among about `count` keys of the keyspace from `cursor`, of `queue` only when given.
      def dedup_keys(cursor, count, queue = nil)
        JobQueue::IdempotencyKeys.new(queue: queue).scan(cursor, count: count)
      end

      # Releases a key if job `jid` still holds it. Whether it did.
      # {classes: [[class, processed, failed, ms], …] busiest first, class:, histogram:} over the last
      # `minutes`, from the Sidekiq 7/8 Metrics keys of `version`; the histogram is that of `klass`,
      # or of the busiest class when none is named.
      def job_metrics(version, minutes, klass)
        classes, histogram = JobQueue.engine.sidekiq_metrics_query(version, minutes, klass)
        classes = classes.sort_by { |name, processed, *| [-processed, name] }
        klass ||= classes.first&.first
        histogram ||= JobQueue.engine.sidekiq_metrics_query(version, minutes, klass).last if klass
        {classes: classes, class: klass, histogram: histogram}
      end

      def dedup_release(key, jid) = JobQueue::IdempotencyKeys.release(key, jid: jid)
    end
  end
end
