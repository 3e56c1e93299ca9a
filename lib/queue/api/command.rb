# frozen_string_literal: true

require "optparse"
require_relative "../command_options"
require_relative "../ordered/command"

module JobQueue
  module API
    # `queue stats`, `queue retry …`, `queue dead …` and `queue morgue …`: the inspection API from a
    # shell. Redis settings come from the app (`-r`, as for the server) or REDIS_URL.
    #
    #   queue stats
    #   queue retry|dead list [--offset N] [--limit N] [--filter TEXT]
    #   queue retry|dead retry|delete JID... | --all
    #   queue morgue list|retry|delete WORKER [ID...]   (ordered workers: queue ordered …)
    class Command
      SETS = {"retry" => -> { RetrySet.new }, "dead" => -> { DeadSet.new }}.freeze
      USAGE = {
        "stats" => "Usage: queue stats [-r PATH] [-e ENV]\n\nTotals, daily history and every queue's size and latency, as a table.",
        "set" => <<~TEXT,
          Usage: queue %<set>s ACTION [options]
            list                 entries, latest first: time, jid, class, queue, retries, error
            retry JID... | --all back to their queues (one retry given back)
            delete JID... | --all removed
        TEXT
        "morgue" => <<~TEXT
          Usage: queue morgue ACTION WORKER [options]   (ordered workers; see queue ordered -h)
            list WORKER          morgue entries, one JSON line each
            retry WORKER ID...   morgue entries back to the queue
            delete WORKER ID...  morgue entries deleted
        TEXT
      }.freeze
      MORGUE_ACTIONS = {"list" => "morgue", "retry" => "requeue", "requeue" => "requeue", "delete" => "delete"}.freeze

      def initialize(out: $stdout)
        @out = out
      end

      # `command` is "stats", "retry", "dead" or "morgue"; `boot` loads the app (given the parsed
      # options). Returns the exit code.
      def run(command, argv, &boot)
        return morgue(argv, &boot) if command == "morgue"

        options = {offset: 0, limit: 25}
        action, *args = parser(command, options).parse(argv)
        return 0 if options[:exit]

        boot&.call(options)
        raise ArgumentError, USAGE["stats"] if command == "stats" && !action.nil?

        on_shard(options[:shard]) { command == "stats" ? stats : set_action(command, action, args, options) }
        0
      end

      private

      # Runs the block on shard `name` (--shard), or as is: the stats of every shard, the sets of "main".
      def on_shard(name, &block)
        name ? Client.via(name, &block) : yield
      end

      def stats
        s = Stats.new
        history = Stats::History.new(7)
        rows = [["Processed", s.processed], ["Failed", s.failed], ["Enqueued", s.enqueued], ["Busy", s.workers_size],
          ["Processes", s.processes_size], ["Scheduled", s.scheduled_size], ["Retries", s.retry_size], ["Dead", s.dead_size],
          ["Default latency (s)", format("%.2f", s.default_queue_latency)]]
        table(%w[Stat Value], rows)
        @out.puts
        table(["Day", "Processed", "Failed"], history.processed.map { |day, n| [day, n, history.failed[day]] })
        @out.puts
        if JobQueue.config.shards.many? && Shards.current.nil?
          queues = Queue.all.sort_by { |q| [q.name, q.shard] }.map { |q| [q.name, q.shard, q.size, format("%.2f", q.latency)] }
          return table(["Queue", "Shard", "Size", "Latency (s)"], queues)
        end

        queues = s.queues.keys.sort.map { |name| [name, s.queues[name], format("%.2f", Queue.new(name).latency)] }
        table(["Queue", "Size", "Latency (s)"], queues)
      end

      def set_action(name, action, args, options)
        set = SETS.fetch(name).call
        case action
        when "list" then list(set, options)
        when "retry", "delete"
          return @out.puts("#{action}: #{every(set, action)} job(s)") if options[:all]
          raise ArgumentError, "queue #{name} #{action} needs JIDs or --all" if args.empty?

          done = args.count { |jid| (entry = set.find_job(jid)) ? entry.public_send(action) : warn_missing(name, jid) }
          @out.puts "#{action}: #{done} job(s)"
        else raise ArgumentError, format(USAGE["set"], set: name)
        end
      end

      def every(set, action)
        return set.retry_all if action == "retry"

        size = set.size
        set.clear
        size
      end

      def warn_missing(name, jid)
        @out.puts "no job #{jid} in the #{name} set"
        false
      end

      def list(set, options)
        page = set.page(options[:offset], options[:limit], filter: options[:filter])
        rows = page.entries.map do |e|
          [e.at.strftime("%Y-%m-%d %H:%M:%S"), e.jid, e.display_class, e.queue, e["retry_count"],
            [e.error_class, e.error_message].compact.join(": ")[0, 80]]
        end
        table(%w[At JID Class Queue Retries Error], rows)
        more = page.next_offset ? " (next: --offset #{page.next_offset})" : ""
        @out.puts "#{page.entries.size} shown of #{page.total}#{more}"
      end

      def morgue(argv, &boot)
        action, *rest = argv
        if action.nil? || %w[-h --help].include?(action)
          @out.puts USAGE["morgue"]
          return 0
        end
        mapped = MORGUE_ACTIONS.fetch(action) { raise ArgumentError, "unknown morgue action #{action.inspect}\n#{USAGE["morgue"]}" }
        Ordered::Command.new(out: @out).run([mapped, *rest], &boot)
      end

      def table(header, rows)
        widths = header.each_index.map { |i| ([header] + rows).map { |r| r[i].to_s.length }.max }
        [header, *rows].each { |r| @out.puts r.each_with_index.map { |v, i| v.to_s.ljust(widths[i]) }.join("  ").rstrip }
      end

      def parser(command, options)
        OptionParser.new do |o|
          o.banner = (command == "stats") ? USAGE["stats"] : format(USAGE["set"], set: command)
          CommandOptions.app(o, options)
          o.on("--shard NAME", "one Redis shard (config.redis_shards): stats add up every shard's, sets are main's unless given") { |v| options[:shard] = v }
          unless command == "stats"
            o.on("--offset N", Integer, "entries to skip (list)") { |v| options[:offset] = v }
            o.on("--limit N", Integer, "entries to show (list, default 25)") { |v| options[:limit] = v }
            o.on("--filter TEXT", "only entries whose JSON contains TEXT: a class, a jid (list)") { |v| options[:filter] = v }
            o.on("--all", "every job of the set (retry, delete)") { options[:all] = true }
          end
          CommandOptions.help(o, options, @out)
        end
      end
    end
  end
end
