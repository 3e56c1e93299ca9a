# frozen_string_literal: true

require "optparse"
require_relative "launcher"
require_relative "launcher_group"
require_relative "migrate_command"
require_relative "declared_queues"
require_relative "sidekiq_gem"
require_relative "rails_integration/config_file"
require_relative "ordered/command"
require_relative "web/command"

module JobQueue
  # `bundle exec queue`: parses Sidekiq's flags (and its YAML config file), boots the app, runs a
  # launcher, and turns signals into quiet, stop and thread dumps.
  #
  # Signals are handled on the main thread: the trap only writes the signal's name to a pipe, and the
  # main loop reads it (Ruby allows little inside a trap). Signals a dashboard sends through Redis
  # arrive through the same loop.
  class CLI
    SIGNALS = %w[INT TERM TSTP TTIN USR1 USR2].freeze
    # Keys of a YAML config file this CLI uses.
    CONFIG_KEYS = %i[concurrency queues timeout tag require verbose environment max_batch labels].freeze
    # Keys of the file the Rails integration reads, for clients and servers alike (config_file.rb).
    APP_CONFIG_KEYS = %i[redis redis_shards routing_rules].freeze
    # Keys Sidekiq's YAML takes that have no meaning here, and what to do instead.
    IGNORED_CONFIG_KEYS = {
      max_retries: "the retry limit is the job's: use sidekiq_options retry: N, or config.default_job_options = {retry: N}"
    }.freeze
    # What Sidekiq 6.4 prints for the flags it removed in 6.0 (and then carries on), word for word but
    # for who logs to STDOUT.
    REMOVED_FLAGS = {
      daemon: "ERROR: Daemonization mode was removed in Sidekiq 6.0, please use a proper process supervisor to start and manage your services",
      logfile: "ERROR: Logfile redirection was removed in Sidekiq 6.0, queue will only log to STDOUT",
      pidfile: "ERROR: PID file creation was removed in Sidekiq 6.0, please use a proper process supervisor to start and manage your services"
    }.freeze

    BANNER = "Usage: queue [options]\n" \
             "       queue cluster [options] GROUP...  (one process per group of queues; queue cluster -h)\n" \
             "       queue migrate [options] FROM TO   (rename a queue, or move one between shards with --queue; queue migrate -h)\n" \
             "       queue stats | retry|dead list|retry|delete | morgue list|retry|delete   (inspect; queue stats -h)\n" \
             "       queue pause|unpause NAME... | paused   (stop or resume fetching a queue; queue pause -h)\n" \
             "       queue cron list | enable|disable|run NAME...   (cron schedules; queue cron -h)\n" \
             "       queue web [--port 7433]           (the dashboard; queue web -h)\n" \
             "       queue feature enable|disable NAME | list   (feature flags in Redis; queue feature -h)\n" \
             "       queue ordered ACTION              (ordered workers' stats and morgue; queue ordered -h)"

    def self.run(argv = ARGV)
      new.run(argv)
    end

    # The environment the app boots in and whose section of the config file applies: -e, else
    # APP_ENV, RAILS_ENV or RACK_ENV, else "development" (as Sidekiq 6.4 and Rails itself fall back).
    def self.environment(given = nil)
      given || ENV["APP_ENV"] || ENV["RAILS_ENV"] || ENV["RACK_ENV"] || "development"
    end

    def initialize(out: $stdout)
      @out = out
    end

    def run(argv)
      # `queue migrate FROM TO`: rename a queue (lib/queue/migrate_command.rb).
      return MigrateCommand.new(out: @out).run(argv.drop(1)) { |options| boot_app(options) } if argv.first == "migrate"
      return feature(argv.drop(1)) if argv.first == "feature"
      # `queue ordered ACTION`: stats and morgue of ordered workers (lib/queue/ordered/command.rb).
      return Ordered::Command.new(out: @out).run(argv.drop(1)) { |options| boot_app(options) } if argv.first == "ordered"
      # `queue stats|retry|dead|morgue …`: the inspection API from a shell (lib/queue/api/command.rb).
      return inspect_command(argv.first, argv.drop(1)) if INSPECT_COMMANDS.include?(argv.first)
      # `queue pause|unpause NAME`, `queue paused` (lib/queue/api/pause_command.rb).
      return pause_command(argv.first, argv.drop(1)) if PAUSE_COMMANDS.include?(argv.first)
      # `queue cron list|enable|disable|run NAME`: the stored cron schedules (lib/queue/cron_command.rb).
      return cron_command(argv.drop(1)) if argv.first == "cron"
      # `queue web --port 7433`: the dashboard on its own server (lib/queue/web/command.rb).
      return Web::Command.new(out: @out).run(argv.drop(1)) { |options| boot_app(options) if options[:require] } if argv.first == "web"

      # `queue cluster GROUP...`: one process per group, forked from this one (lib/queue/cluster).
      return cluster(argv.drop(1)) if argv.first == "cluster"

      # Lines reach a file or pipe as they happen (as in Sidekiq's CLI), not when the buffer fills.
      $stdout.sync = true
      options = parse(argv)
      return 0 if options[:exit]

      status = prepare(options)
      return status if status

      launch(served_shards(options[:shard]))
    end

    # Everything a server does before it starts, in the process that will run it (or, for a cluster,
    # in the parent, once, before it forks): settings, the app, the declared queues, the cron
    # schedule file. Returns an exit status when there is nothing to start, else nil.
    def prepare(options)
      JobQueue.server!
      apply(options)
      return no_app if options[:require].nil? && !rails_app?(".")

      # The sidekiq gem's Sidekiq.configure_server blocks run, and what they set is handed over.
      SidekiqGem.watch { boot(options) }
      SidekiqGem.adopt(JobQueue.config)
      DeclaredQueues.apply(JobQueue.config) # queues of declared ApplicationWorkers (declared_queues.rb)
      Cron.load_schedule_file_at_start # config/schedule.yml, as sidekiq-cron loads it (cron.rb)
      nil
    end

    # The shards this server serves: --shard (comma-separated), else QUEUE_SHARD_NAME, else "main";
    # each must be one of config.redis_shards (checked once the app has configured them).
    def served_shards(given)
      text = given || ENV["QUEUE_SHARD_NAME"]
      text = Shards::MAIN if text.nil? || text.strip.empty?
      names = text.split(",").map(&:strip).reject(&:empty?)
      raise ArgumentError, "--shard #{text.inspect} names a shard twice" if names.uniq.size != names.size

      names.map { |name| JobQueue.config.shards.check!(name) }
    end

    # Parses flags, then merges a YAML file (-C) under them: flags win. A block may add options to
    # the parser (`queue cluster` does); the arguments left over are in `:args`.
    def parse(argv)
      flags = {queues: []}
      parser = option_parser(flags)
      yield parser, flags if block_given?
      flags[:args] = parser.parse(argv)
      return flags if flags[:exit]

      flags.delete(:queues) if flags[:queues].empty?
      file = flags[:config_file] || default_config_file(flags[:require])
      from_file = file ? load_config_file(file, flags[:environment]) : {}
      from_file.merge(flags)
    end

    # `queue feature enable|disable NAME` and `queue feature list`: the feature flags stored in Redis
    # (`disable_<queue>_deduplication`), with the app loaded by `-r` for its Redis settings.
    def feature(argv)
      options = {}
      args = OptionParser.new do |o|
        o.banner = "Usage: queue feature enable|disable NAME | list [-r PATH]"
        o.on("-r", "--require [PATH|DIR]", "Rails app directory or Ruby file that configures Redis") { |v| options[:require] = v }
      end.parse(argv)
      action, name = args
      boot(options) if options[:require]
      flags = FeatureFlags.new(JobQueue.config)
      case action
      when "enable", "disable"
        raise ArgumentError, "queue feature #{action} needs a flag NAME" if name.to_s.empty?

        flags.public_send(action, name)
        @out.puts "#{name}: #{action}d"
      when "list"
        flags.all.sort.each { |flag, value| @out.puts "#{flag}=#{value}" }
      else
        raise ArgumentError, "unknown feature action #{action.inspect}; use enable, disable or list"
      end
      0
    end

    INSPECT_COMMANDS = %w[stats retry dead morgue].freeze
    PAUSE_COMMANDS = %w[pause unpause paused].freeze

    # The server's options parser (`queue cluster` adds its own to it).
    def option_parser(opts)
      OptionParser.new do |o|
        o.banner = BANNER
        server_options(o, opts)
        o.on_tail("-h", "--help", "show this help") do
          @out.puts o
          opts[:exit] = true
        end
      end
    end

    private

    def cluster(argv)
      require_relative "cluster"
      Cluster::Command.new(self, out: @out).run(argv)
    end

    def inspect_command(command, argv)
      require_relative "api"
      require_relative "api/command"
      API::Command.new(out: @out).run(command, argv) { |options| boot_app(options) if options[:require] }
    end

    def pause_command(command, argv)
      require_relative "api"
      require_relative "api/pause_command"
      API::PauseCommand.new(out: @out).run(command, argv) { |options| boot_app(options) if options[:require] }
    end

    def cron_command(argv)
      require_relative "cron_command"
      CronCommand.new(out: @out).run(argv) { |options| boot_app(options) if options[:require] }
    end

    # Loads the app for a subcommand, with its environment.
    def boot_app(options)
      ENV["RAILS_ENV"] = ENV["RACK_ENV"] = CLI.environment(options[:environment])
      boot(options)
    end

    # The flags every server takes, `queue` and each process of `queue cluster` alike.
    def server_options(o, opts)
      o.on("-c", "--concurrency INT", Integer, "processor threads (default 10)") { |v| opts[:concurrency] = v }
      o.on("-q", "--queue QUEUE[,WEIGHT]",
        "queue to process, repeatable (default \"default\").",
        "An app with ApplicationWorkers defaults to their queues,",
        "weighted; a namespace (-q cronjob) stands for its queues.",
        "Without weights queues are served in strict order;",
        "with any weight, in a random order weighted per fetch",
        "(unweighted queues weigh 1, so a,1 b,1 share evenly)") { |v| opts[:queues] << v }
      o.on("-r", "--require [PATH|DIR]", "Rails app directory or Ruby file to load (default .)") { |v| opts[:require] = v }
      o.on("-t", "--timeout NUM", Float, "shutdown timeout in seconds (default 25)") { |v| opts[:timeout] = v }
      o.on("-C", "--config PATH", "YAML config file (default config/queue.yml or config/sidekiq.yml in the app directory)") { |v| opts[:config_file] = v }
      o.on("-e", "--environment ENV", "application environment (default APP_ENV, RAILS_ENV, RACK_ENV or development)") { |v| opts[:environment] = v }
      o.on("--shard NAME[,NAME]", "Redis shard(s) to serve, from config.redis_shards (default QUEUE_SHARD_NAME, else main)") { |v| opts[:shard] = v }
      o.on("-g", "--tag TAG", "process tag shown in the dashboard (default: the Rails app's directory name)") { |v| opts[:tag] = v }
      o.on("--max-batch INT", Integer, "most jobs one fetch takes for one thread, #{Configuration::MAX_BATCH_RANGE} (default #{Configuration::DEFAULT_MAX_BATCH})") do |v|
        raise OptionParser::InvalidArgument, "#{v} (must be #{Configuration::MAX_BATCH_RANGE})" unless Configuration::MAX_BATCH_RANGE.cover?(v)

        opts[:max_batch] = v
      end
      o.on("-v", "--verbose", "debug logging, the engine's too (default info; QUEUE_LOG sets the engine's)") { opts[:verbose] = true }
      o.on("-d", "--daemon", "removed, as in Sidekiq 6.0: prints why and carries on") { @out.puts REMOVED_FLAGS[:daemon] }
      o.on("-L", "--logfile PATH", "removed, as in Sidekiq 6.0: prints why and carries on") { @out.puts REMOVED_FLAGS[:logfile] }
      o.on("-P", "--pidfile PATH", "removed, as in Sidekiq 6.0: prints why and carries on") { @out.puts REMOVED_FLAGS[:pidfile] }
      o.on("-V", "--version", "print version and exit") do
        @out.puts "queue #{VERSION}"
        opts[:exit] = true
      end
    end

    def default_config_file(require_path)
      dir = require_path && File.directory?(require_path) ? require_path : "."
      %w[config/queue.yml config/sidekiq.yml].map { |f| File.join(dir, f) }.find { |f| File.exist?(f) }
    end

    # Sidekiq's format: top-level keys (":concurrency:", ":queues:", ...) plus per-environment
    # sections that override them (the section of CLI.environment: development when none is given).
    # ERB is evaluated first.
    def load_config_file(path, environment)
      raise ArgumentError, "config file #{path} does not exist" unless File.exist?(path)

      data = RailsIntegration::ConfigFile.read(path)
      raise ArgumentError, "config file #{path} must hold a mapping" unless data.is_a?(Hash)

      data = data.transform_keys { |k| k.to_s.delete_prefix(":").to_sym }
      section = data.delete(CLI.environment(environment).to_sym)
      data = data.merge(section.transform_keys { |k| k.to_s.delete_prefix(":").to_sym }) if section.is_a?(Hash)
      data[:queues] = config_queues(path, data[:queues]) if data[:queues]
      data[:labels] = Array(data[:labels]).map(&:to_s) if data.key?(:labels)
      warn_unused_keys(path, data)
      data.slice(*CONFIG_KEYS)
    end

    # The file's :queues:, each "name", "name,weight" or [name, weight]. A comma followed by another
    # name ("critical, default") is a list written on one line, which YAML reads as one string.
    def config_queues(path, queues)
      Array(queues).map do |queue|
        next queue if queue.is_a?(Array)

        queue = queue.to_s
        _, rest = queue.split(",", 2)
        raise ArgumentError, one_line_queues(path, queue) if rest&.match?(/[[:alpha:]_]/)

        queue
      end
    end

    def one_line_queues(path, queue)
      names = queue.split(",").map(&:strip).reject(&:empty?)
      "config file #{path}: `:queues: #{queue}` is one string in YAML, not a list of queues; write one queue per line:\n" \
        ":queues:\n#{names.map { |name| "  - #{name}\n" }.join}(or [name, weight] per line, e.g. \"  - [critical, 2]\")"
    end

    # Every key the file sets that this CLI does not use gets a warning. A mapping is taken for another
    # environment's section and passes without one.
    def warn_unused_keys(path, data)
      data.each do |key, value|
        next if CONFIG_KEYS.include?(key) || APP_CONFIG_KEYS.include?(key) || value.is_a?(Hash)

        reason = IGNORED_CONFIG_KEYS[key] || "not an option of queue"
        JobQueue.logger.warn("config file #{path}: :#{key}: ignored (#{reason})")
      end
    end

    def rails_app?(dir)
      File.exist?(File.join(dir, "config", "application.rb"))
    end

    # Sidekiq's validate!: nothing to load means no job could run, so say how to point at the app and
    # exit 1 instead of starting.
    def no_app
      @out.puts "=================================================================="
      @out.puts "  Please point queue to a Rails application or a Ruby file  "
      @out.puts "  to load your job classes with -r [DIR|FILE]."
      @out.puts "=================================================================="
      @out.puts option_parser({queues: []})
      1
    end

    def apply(options)
      config = JobQueue.config
      # The app boots in the environment whose section of the file was read, as in Sidekiq.
      config.environment = ENV["RAILS_ENV"] = ENV["RACK_ENV"] = CLI.environment(options[:environment])
      config.concurrency = options[:concurrency] if options[:concurrency]
      config.queues = options[:queues] if options[:queues]
      config.timeout = options[:timeout] if options[:timeout]
      config.max_batch = options[:max_batch] if options[:max_batch]
      config.tag = options[:tag] if options[:tag]
      config.labels = options[:labels] if options[:labels]
      verbose! if options[:verbose]
    end

    # -v: the Ruby logger at DEBUG, and the engine's debug lines (fetch batches, scheduler moves,
    # recovery) on stderr, unless QUEUE_LOG chose the engine's filter.
    def verbose!
      JobQueue.config.logger.level = ::Logger::DEBUG
      Native.log_level = "debug" unless ENV.key?("QUEUE_LOG")
    end

    # A directory with config/application.rb is a Rails app: load its environment and eager-load it.
    # So is a Rails app's config/environment.rb (`-r ./config/environment.rb`). Anything else is a Ruby
    # file to require.
    def boot(options)
      path = options[:require] || "."
      if File.directory?(path)
        if File.exist?(File.join(path, "config", "application.rb"))
          boot_rails(path)
        elsif options[:require]
          raise ArgumentError, "#{path} is a directory but not a Rails app (no config/application.rb); pass a Ruby file with -r"
        end
      elsif (root = rails_root_of(path))
        boot_rails(root)
      elsif File.exist?(path) || File.exist?("#{path}.rb")
        require File.expand_path(path)
      else
        raise ArgumentError, "cannot load #{path}: no such file or directory"
      end
    end

    def boot_rails(root)
      require File.expand_path("config/application.rb", root) # Rails is loaded now; the Railtie must be before the app initializes
      require_relative "railtie" if defined?(::Rails::Railtie)
      require File.expand_path("config/environment.rb", root)
      ::Rails.application.eager_load! if defined?(::Rails) && ::Rails.application.respond_to?(:eager_load!)
      JobQueue.config.tag = File.basename(File.expand_path(root)) if JobQueue.config.tag.to_s.empty?
    end

    # The app directory of a path to a Rails app's config/environment(.rb), else nil.
    def rails_root_of(path)
      file = File.expand_path(path.end_with?(".rb") ? path : "#{path}.rb")
      config = File.dirname(file)
      return nil unless File.basename(file) == "environment.rb" && File.basename(config) == "config"
      return nil unless File.exist?(file) && File.exist?(File.join(config, "application.rb"))

      File.dirname(config)
    end

    # Runs the server until a signal stops it: traps SIGNALS, starts a Launcher per shard served, and returns the exit
    # status.
    def launch(shards)
      reader, writer = IO.pipe
      SIGNALS.each do |sig|
        trap(sig) { writer.write_nonblock("#{sig}\n", exception: false) }
      rescue ArgumentError
        # signal not supported on this platform
      end
      launcher = shards.size == 1 ? Launcher.new(JobQueue.config, shard: shards.first) : LauncherGroup.new(JobQueue.config, shards)
      begin
        launcher.run
        wait_for_stop(reader, launcher)
      rescue StandardError => e
        # Stopped by an error outside any job: stop what runs, then tell the app (Lowkiq's last_words).
        # A server that never started (Redis refused it) has nothing to stop: exe/queue prints the
        # error once and exits 1.
        stop_after(launcher, e) if launcher.started?
        last_words(e)
        raise
      end
      stop(launcher).tap { last_words(nil) }
    end

    # The pid of the `queue cluster` parent this process was forked by, if any: once that parent is
    # gone, the server stops as on TERM rather than run on unsupervised.
    # @api private
    attr_writer :cluster_parent

    public :launch, :cluster_parent=

    def wait_for_stop(reader, launcher)
      loop do
        ready = IO.select([reader], nil, nil, 1)
        signals = ready ? reader.read_nonblock(1024, exception: false).to_s.split("\n") : []
        signals.concat(launcher.remote_signals)
        signals << orphaned if @cluster_parent && ::Process.ppid != @cluster_parent
        launcher.update_title
        signals.each do |sig|
          return if handle(sig, launcher) == :stop
        end
      end
    end

    def orphaned
      JobQueue.logger.warn("the queue cluster parent (pid #{@cluster_parent}) is gone: stopping")
      @cluster_parent = nil
      "TERM"
    end

    def stop_after(launcher, error)
      JobQueue.logger.error("stopping after #{error.class}: #{error.message}")
      launcher.stop
    rescue StandardError => e
      JobQueue.config.report_error(e, context: "stopping after an error failed")
    end

    def last_words(error)
      JobQueue.config.last_words&.call(error)
    rescue StandardError => e
      JobQueue.config.report_error(e, context: "last_words raised")
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
