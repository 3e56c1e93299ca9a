# frozen_string_literal: true

require "optparse"
require_relative "../command_options"

module JobQueue
  module API
    # `queue pause NAME...`, `queue unpause NAME...` and `queue paused`: JobQueue::Queue#pause! and
    # #unpause! from a shell. Every server process stops fetching a paused queue within a second;
    # pushes go on. Redis settings come from the app (`-r`) or REDIS_URL.
    class PauseCommand
      COMMANDS = %w[pause unpause paused].freeze
      USAGE = <<~TEXT
        Usage: queue pause NAME... | queue unpause NAME... | queue paused   [-r PATH] [-e ENV]
          pause NAME...    every process stops fetching these queues (pushes go on, jobs wait)
          unpause NAME...  every process fetches them again
          paused           the paused queues, one per line
      TEXT

      def initialize(out: $stdout)
        @out = out
      end

      # `command` is "pause", "unpause" or "paused"; `boot` loads the app. Returns the exit code.
      def run(command, argv, &boot)
        options = {}
        names = parser(options).parse(argv)
        return 0 if options[:exit]

        boot&.call(options)
        if command == "paused"
          raise ArgumentError, USAGE unless names.empty?

          Queue.paused_names.each { |name| @out.puts name }
        else
          raise ArgumentError, "queue #{command} needs a queue NAME\n#{USAGE}" if names.empty?

          names.each { |name| @out.puts "#{name}: #{change(command, name)}" }
        end
        0
      end

      private

      def change(command, name)
        queue = Queue.new(name)
        if command == "pause"
          queue.pause! ? "paused" : "already paused"
        else
          queue.unpause! ? "unpaused" : "was not paused"
        end
      end

      def parser(options) = CommandOptions.parser(USAGE, options, @out)
    end
  end
end
