# frozen_string_literal: true

require "optparse"
require "yaml"
require "erb"
require_relative "launcher"

module JobQueue
  # `bundle exec queue`: parses Sidekiq's flags (and its YAML config file), boots the app, runs a
  # launcher, and turns signals into quiet, stop and thread dumps.
  #
  # Signals are handled on the main thread: the trap only writes the signal's name to a pipe, and the
  # main loop reads it (Ruby allows little inside a trap). Signals a dashboard sends through Redis
  # arrive through the same loop.
  class CLI
    SIGNALS = %w[INT TERM TSTP TTIN USR1 USR2].freeze

    def self.run(argv = ARGV)
      new.run(argv)
    end

    def initialize(out: $stdout)
      @out = out
    end

    def run(argv)
      options = parse(argv)
      return 0 if options[:exit]

      # Log lines reach a file or pipe as they happen (as in Sidekiq's CLI), not when the buffer fills.
      $stdout.sync = true
      JobQueue.server!
      apply(options)
      boot(options)
      launch
    end

    # Parses flags, then merges a YAML file (-C) under them: flags win.
    def parse(argv)
      flags = {queues: []}
      parser = option_parser(flags)
      parser.parse!(argv.dup)
      return flags if flags[:exit]

      flags.delete(:queues) if flags[:queues].empty?
      file = flags[:config_file] || default_config_file(flags[:require])
      from_file = file ? load_config_file(file, flags[:environment]) : {}
      from_file.merge(flags)
    end

    private

    def option_parser(opts)
      OptionParser.new do |o|
        o.banner = "Usage: queue [options]"
        o.on("-c", "--concurrency INT", Integer, "processor threads (default 10)") { |v| opts[:concurrency] = v }
        o.on("-q", "--queue QUEUE[,WEIGHT]", "queue to process, with optional weight; repeatable") { |v| opts[:queues] << v }
        o.on("-r", "--require [PATH|DIR]", "Rails app directory or Ruby file to load") { |v| opts[:require] = v }
        o.on("-t", "--timeout NUM", Float, "shutdown timeout in seconds (default 25)") { |v| opts[:timeout] = v }
        o.on("-C", "--config PATH", "YAML config file") { |v| opts[:config_file] = v }
        o.on("-e", "--environment ENV", "application environment") { |v| opts[:environment] = v }
        o.on("-g", "--tag TAG", "process tag shown in the dashboard") { |v| opts[:tag] = v }
        o.on("-v", "--verbose", "debug logging") { opts[:verbose] = true }
        o.on("-V", "--version", "print version and exit") do
          @out.puts "queue #{VERSION}"
          opts[:exit] = true
        end
        o.on_tail("-h", "--help", "show this help") do
          @out.puts o
          opts[:exit] = true
        end
      end
    end

    def default_config_file(require_path)
      dir = require_path && File.directory?(require_path) ? require_path : "."
      %w[config/queue.yml config/sidekiq.yml].map { |f| File.join(dir, f) }.find { |f| File.exist?(f) }
    end

    # Sidekiq's format: top-level keys (":concurrency:", ":queues:", ...) plus per-environment
    # sections that override them. ERB is evaluated first.
    def load_config_file(path, environment)
      raise ArgumentError, "config file #{path} does not exist" unless File.exist?(path)

      data = YAML.safe_load(ERB.new(File.read(path)).result, permitted_classes: [Symbol], aliases: true) || {}
      raise ArgumentError, "config file #{path} must hold a mapping" unless data.is_a?(Hash)

      data = data.transform_keys { |k| k.to_s.delete_prefix(":").to_sym }
      env = environment || ENV["RAILS_ENV"] || ENV["RACK_ENV"]
      section = env && data.delete(env.to_sym)
      data = data.merge(section.transform_keys { |k| k.to_s.delete_prefix(":").to_sym }) if section.is_a?(Hash)
      data[:queues] = data[:queues].map { |q| q.is_a?(Array) ? q.join(",") : q.to_s } if data[:queues]
      data.slice(:concurrency, :queues, :timeout, :tag, :require, :verbose, :environment, :max_batch)
    end

    def apply(options)
      config = JobQueue.config
      ENV["RAILS_ENV"] = ENV["RACK_ENV"] = options[:environment] if options[:environment]
      config.environment = options[:environment]
      config.concurrency = options[:concurrency] if options[:concurrency]
      config.queues = options[:queues] if options[:queues]
      config.timeout = options[:timeout] if options[:timeout]
      config.max_batch = options[:max_batch] if options[:max_batch]
      config.tag = options[:tag] if options[:tag]
      config.logger.level = ::Logger::DEBUG if options[:verbose]
    end

    # A directory with config/application.rb is a Rails app: load its environment and eager-load it.
    # Anything else is a Ruby file to require.
    def boot(options)
      path = options[:require] || "."
      if File.directory?(path)
        app = File.expand_path("config/application.rb", path)
        if File.exist?(app)
          require File.expand_path("config/environment.rb", path)
          ::Rails.application.eager_load! if defined?(::Rails) && ::Rails.application.respond_to?(:eager_load!)
          JobQueue.config.tag = File.basename(File.expand_path(path)) if JobQueue.config.tag.to_s.empty?
        elsif options[:require]
          raise ArgumentError, "#{path} is a directory but not a Rails app (no config/application.rb); pass a Ruby file with -r"
        end
      elsif File.exist?(path) || File.exist?("#{path}.rb")
        require File.expand_path(path)
      else
        raise ArgumentError, "cannot load #{path}: no such file or directory"
      end
    end

    def launch
      reader, writer = IO.pipe
      SIGNALS.each do |sig|
        trap(sig) { writer.write_nonblock("#{sig}\n", exception: false) }
      rescue ArgumentError
        # signal not supported on this platform
      end
      launcher = Launcher.new(JobQueue.config).run
      loop do
        ready = IO.select([reader], nil, nil, 1)
        signals = ready ? reader.read_nonblock(1024, exception: false).to_s.split("\n") : []
        signals.concat(launcher.remote_signals)
        signals.each do |sig|
          return stop(launcher) if handle(sig, launcher) == :stop
        end
      end
    end

    def handle(sig, launcher)
      case sig
      when "INT", "TERM" then :stop
      when "TSTP", "USR1" then launcher.quiet
      when "TTIN" then dump_threads
      else JobQueue.logger.info("ignoring signal #{sig}")
      end
    end

    def stop(launcher)
      JobQueue.logger.info("shutting down (timeout #{JobQueue.config.timeout}s)")
      launcher.stop
      0
    end

    def dump_threads
      Thread.list.each do |thread|
        JobQueue.logger.warn("Thread #{thread.name || thread.object_id.to_s(36)} (#{thread.status})")
        JobQueue.logger.warn((thread.backtrace || ["<no backtrace>"]).join("\n"))
      end
    end
  end
end
