# frozen_string_literal: true

require "optparse"

module JobQueue
  # The flags every `queue` subcommand that works on an app's data shares (migrate, ordered, stats,
  # retry, dead, morgue, web): `-r` the app to load, for its Redis settings and workers; `-e` its
  # environment; `-h`, which prints the help to `out` and marks `options[:exit]`.
  module CommandOptions
    module_function

    # Adds -r and -e to `parser`; `loads` finishes "Rails app directory or Ruby file that …".
    def app(parser, options, loads: "configures Redis")
      parser.on("-r", "--require [PATH|DIR]", "Rails app directory or Ruby file that #{loads}") { |v| options[:require] = v }
      parser.on("-e", "--environment ENV", "application environment") { |v| options[:environment] = v }
    end

    # A parser with `banner`, -r and -e, whatever the block adds, and -h: a subcommand's whole parser.
    def parser(banner, options, out)
      OptionParser.new do |o|
        o.banner = banner
        app(o, options)
        yield o if block_given?
        help(o, options, out)
      end
    end

    def help(parser, options, out)
      parser.on_tail("-h", "--help", "show this help") do
        out.puts parser
        options[:exit] = true
      end
    end
  end
end
