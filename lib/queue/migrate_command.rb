# frozen_string_literal: true

require_relative "command_options"

module JobQueue
  # `queue migrate [options] FROM TO`: renames a queue (see JobQueue.migrate_queue) and prints what
  # moved. Redis settings come from the app (`-r`, as for the server) or REDIS_URL.
  class MigrateCommand
    USAGE = "Usage: queue migrate [options] FROM TO"

    def initialize(out: $stdout)
      @out = out
    end

    # `boot` loads the app as the server's CLI does (given the parsed options). Returns the exit code.
    def run(argv, &boot)
      options = {}
      parser = option_parser(options)
      from, to, *rest = parser.parse(argv)
      return 0 if options[:exit]
      raise ArgumentError, "#{USAGE} (got #{argv.size} argument(s))" if to.nil? || rest.any?

      boot&.call(options)
      JobQueue.config.namespace = options[:namespace] if options.key?(:namespace)
      moved = JobQueue.migrate_queue(from, to)
      @out.puts "migrated queue #{from} to #{to}: #{moved["queued"]} queued, #{moved["scheduled"]} scheduled, " \
                "#{moved["retry"]} retrying job(s), #{moved["keys"]} deduplication key(s)"
      0
    end

    private

    def option_parser(options)
      OptionParser.new do |o|
        o.banner = "#{USAGE}\n\nMoves the queued, scheduled and retrying jobs of queue FROM (and their deduplication keys) to queue TO."
        CommandOptions.app(o, options)
        o.on("-n", "--namespace NS", "key prefix (overrides the app's)") { |v| options[:namespace] = v }
        CommandOptions.help(o, options, @out)
      end
    end
  end
end
