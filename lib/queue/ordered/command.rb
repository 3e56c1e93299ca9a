# frozen_string_literal: true

require_relative "../command_options"

module JobQueue
  module Ordered
    # `queue ordered …`: the dashboard's numbers and actions from a shell (JobQueue::Ordered). The app
    # is loaded with `-r`, as for the server, so its ordered workers and Redis settings are known.
    #
    #   queue ordered stats
    #   queue ordered morgue WORKER [--sort id|time] [--desc] [--offset N] [--limit N]
    #   queue ordered requeue|delete WORKER ID...
    #   queue ordered requeue-all|delete-all WORKER
    #   queue ordered perform-all-jobs-now|kill-all-failed-jobs|delete-all-failed-jobs [WORKER]
    class Command
      USAGE = <<~TEXT
        Usage: queue ordered ACTION [options]
          stats                                   Lowkiq's stats document (JSON)
          morgue WORKER                           morgue entries, one JSON line each (payloads as
                                                  JSON; a Ruby object JSON cannot hold as {"$ruby": inspect})
          requeue WORKER ID...                    morgue entries back to the queue
          delete WORKER ID...                     morgue entries deleted
          requeue-all WORKER | delete-all WORKER  the whole morgue
          perform-all-jobs-now [WORKER]           every queued id due now
          kill-all-failed-jobs [WORKER]           failed queued ids to the morgue
          delete-all-failed-jobs [WORKER]         failed queued ids deleted
      TEXT
      ALL_WORKERS = %w[perform-all-jobs-now kill-all-failed-jobs delete-all-failed-jobs].freeze

      def initialize(out: $stdout)
        @out = out
      end

      # `boot` loads the app (given the parsed options). Returns the exit code.
      def run(argv, &boot)
        options = {sort: :id, offset: 0, limit: 100}
        action, *args = parser(options).parse(argv)
        return 0 if options[:exit]
        raise ArgumentError, USAGE if action.nil?

        boot&.call(options)
        dispatch(action, args, options)
        0
      end

      private

      def dispatch(action, args, options)
        case action
        when "stats" then @out.puts JSON.pretty_generate(Ordered.stats)
        when "morgue" then morgue(one_worker(action, args), options)
        when "requeue", "delete" then ids_action(action, args)
        when "requeue-all", "delete-all" then count(action, Ordered.public_send(method_of(action), one_worker(action, args)))
        when *ALL_WORKERS
          raise ArgumentError, "queue ordered #{action} takes at most one WORKER" if args.size > 1

          count(action, Ordered.public_send(method_of(action), args.first))
        else raise ArgumentError, "unknown action #{action.inspect}\n#{USAGE}"
        end
      end

      def morgue(worker, options)
        Ordered.morgue(worker, sort: options[:sort], descending: options[:desc], offset: options[:offset], limit: options[:limit]).each do |entry|
          @out.puts JSON.generate(entry.merge(payloads: entry[:payloads].map { |p, s| [PayloadFormat.printable(p), s] }))
        end
      end

      def ids_action(action, args)
        worker, *ids = args
        raise ArgumentError, "queue ordered #{action} needs a WORKER and at least one ID" if worker.nil? || ids.empty?

        count(action, Ordered.public_send(action, worker, ids))
      end

      def one_worker(action, args)
        raise ArgumentError, "queue ordered #{action} needs exactly one WORKER" unless args.size == 1

        args.first
      end

      def method_of(action) = action.tr("-", "_")

      def count(action, n)
        @out.puts "#{action}: #{n} id(s)"
      end

      def parser(options)
        OptionParser.new do |o|
          o.banner = USAGE
          CommandOptions.app(o, options, loads: "loads the workers")
          o.on("--sort FIELD", %w[id time updated_at], "morgue order: id (default) or time") { |v| options[:sort] = v == "time" ? :updated_at : v.to_sym }
          o.on("--desc", "morgue in descending order") { options[:desc] = true }
          o.on("--offset N", Integer, "morgue entries to skip") { |v| options[:offset] = v }
          o.on("--limit N", Integer, "morgue entries to show (default 100)") { |v| options[:limit] = v }
          CommandOptions.help(o, options, @out)
        end
      end
    end
  end
end
