# frozen_string_literal: true

require_relative "command_options"

module JobQueue
  # `queue migrate [options] FROM TO`: renames a queue (see JobQueue.migrate_queue) and prints what
  # moved. `queue migrate --queue NAME --from SHARD --to SHARD` moves a queue between shards instead
  # (JobQueue.move_queue). Redis settings come from the app (`-r`, as for the server) or REDIS_URL.
  class MigrateCommand
    USAGE = "Usage: queue migrate [options] FROM TO\n       queue migrate [options] --queue NAME --from SHARD --to SHARD"

    def initialize(out: $stdout)
      @out = out
    end

    # `boot` loads the app as the server's CLI does (given the parsed options). Returns the exit code.
    def run(argv, &boot)
      options = {}
      parser = option_parser(options)
      from, to, *rest = parser.parse(argv)
      return 0 if options[:exit]
      return move_between_shards(options, [from, to, *rest].compact, &boot) if options.key?(:queue)
      raise ArgumentError, "#{USAGE} (got #{argv.size} argument(s))" if to.nil? || rest.any?

      boot&.call(options)
      JobQueue.config.namespace = options[:namespace] if options.key?(:namespace)
      moved = JobQueue.migrate_queue(from, to)
      @out.puts "migrated queue #{from} to #{to}: #{moved["queued"]} queued, #{moved["scheduled"]} scheduled, " \
                "#{moved["retry"]} retrying job(s), #{moved["keys"]} deduplication key(s)"
      0
    end

    private

    def move_between_shards(options, extra, &boot)
      raise ArgumentError, "queue migrate --queue NAME takes --from SHARD and --to SHARD, not arguments (got #{extra.join(" ")})" if extra.any?
      raise ArgumentError, "queue migrate --queue #{options[:queue]} needs --from SHARD and --to SHARD" unless options[:from] && options[:to]

      boot&.call(options)
      JobQueue.config.namespace = options[:namespace] if options.key?(:namespace)
      moved = JobQueue.move_queue(options[:queue], from: options[:from], to: options[:to])
      @out.puts "moved queue #{options[:queue]} from shard #{options[:from]} to #{options[:to]}: #{moved["queued"]} queued, " \
                "#{moved["scheduled"]} scheduled, #{moved["retry"]} retrying job(s), #{moved["keys"]} deduplication key(s)"
      0
    end

    def option_parser(options)
      OptionParser.new do |o|
        o.banner = "#{USAGE}\n\nMoves the queued, scheduled and retrying jobs of queue FROM (and their deduplication keys) to queue TO."
        CommandOptions.app(o, options)
        o.on("-n", "--namespace NS", "key prefix (overrides the app's)") { |v| options[:namespace] = v }
        o.on("--queue NAME", "move queue NAME between shards (config.redis_shards), with --from and --to") { |v| options[:queue] = v }
        o.on("--from SHARD", "the shard queue NAME leaves") { |v| options[:from] = v }
        o.on("--to SHARD", "the shard queue NAME moves to") { |v| options[:to] = v }
        CommandOptions.help(o, options, @out)
      end
    end
  end
end
