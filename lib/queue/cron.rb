# frozen_string_literal: true

require "json"
require "time"

module JobQueue
  # Cron schedules in sidekiq-cron 1.8's Redis format (WIRE.md §5). Schedules an app created with
  # sidekiq-cron keep running on our server (the scheduler leader pushes each tick once, see
  # ARCHITECTURE.md), and sidekiq-cron's own API lists, enables and disables the ones stored here.
  #
  #   JobQueue::Cron.load_from_hash(
  #     "nightly_report" => { "class" => "ReportWorker", "cron" => "0 3 * * * Europe/Berlin" },
  #     "heartbeat"      => { "class" => "PingWorker", "cron" => "*/10 * * * * *", "args" => [1] }
  #   )
  #   JobQueue::Cron::Job.find("heartbeat").disable!
  #
  # A cron string has five fields, or six with seconds first, and may end with an IANA time zone;
  # without one it runs in the server's local zone, as sidekiq-cron's does. Bad input (a cron string,
  # a time zone, an unknown class, a YAML file of the wrong shape) raises InvalidSchedule naming the
  # schedule, before anything is written.
  module Cron
    # A schedule that cannot be stored; the message names it.
    class InvalidSchedule < ArgumentError; end

    # sidekiq-cron's truth test for flags read from YAML or Redis.
    TRUE_FLAG = /\A(true|t|yes|y|1)\z/i
    # `last_enqueue_time` as sidekiq-cron writes it.
    TIME_FORMAT = "%Y-%m-%d %H:%M:%S %z"

    class << self
      # The file a server loads at start when it exists (sidekiq-cron's `cron_schedule_file`).
      attr_writer :schedule_file

      # Whether the start's load removes stored schedules the app no longer declares (default true).
      attr_writer :remove_undeclared

      def schedule_file = @schedule_file || "config/schedule.yml"

      def remove_undeclared = @remove_undeclared != false

      # Called by the CLI once the app is booted, as sidekiq-cron's schedule loader runs at startup:
      # the app's declared schedules (the schedule file's and the workers' `cron`) are stored, and,
      # unless the app declares none, the stored schedules it no longer declares are removed. A bad
      # schedule stops the start with an error naming it, and nothing is stored.
      def load_schedule_file_at_start
        declared = File.exist?(schedule_file) ? read_file(schedule_file) : []
        declared += declared_by_workers
        return [] if declared.empty?

        names = declared.map { |options| options["name"] }
        twice = names.select { |name| names.count(name) > 1 }.uniq
        raise InvalidSchedule, "cron schedule #{twice.first.inspect} is declared twice (#{schedule_file} and a worker's cron, or two workers)" unless twice.empty?

        remove_undeclared ? load_from_array!(declared) : load_from_array(declared)
      end

      # Records a worker's schedule (`cron "*/5 * * * *"` in the class); stored by the server's start.
      def declare(klass, cron, name: nil, **options)
        raise InvalidSchedule, "#{klass}: cron needs a cron string, got #{cron.inspect}" unless cron.is_a?(String) && !cron.strip.empty?
        raise InvalidSchedule, "#{klass}: cron needs a named class" if klass.name.nil?

        name = (name || default_name(klass)).to_s
        declared[name] = options.transform_keys(&:to_s).merge("name" => name, "class" => klass.name, "cron" => cron)
      end

      # The schedules workers declared, as options with names.
      def declared_by_workers = declared.values

      # The name a worker's schedule gets unless given: the class name underscored
      # (`Admin::PruneWorker` => "admin/prune_worker").
      def default_name(klass)
        klass.name.gsub("::", "/").gsub(/([A-Z\d]+)([A-Z][a-z])/, '\1_\2').gsub(/([a-z\d])([A-Z])/, '\1_\2').downcase
      end

      # Stores each schedule of `hash` (name => options). Raises InvalidSchedule, and stores none, if
      # any is bad.
      def load_from_hash(hash)
        raise InvalidSchedule, "cron schedules must be a Hash of name => options, got #{hash.class}" unless hash.is_a?(Hash)

        load_from_array(hash.map { |name, options| with_name(name, options) })
      end

      # load_from_hash, then removes the stored schedules `hash` does not declare.
      def load_from_hash!(hash)
        jobs = load_from_hash(hash)
        destroy_others(jobs.map(&:name))
        jobs
      end

      # Stores each schedule of `array` (options with a "name"). Raises InvalidSchedule, and stores
      # none, if any is bad.
      def load_from_array(array)
        raise InvalidSchedule, "cron schedules must be an Array of options, got #{array.class}" unless array.is_a?(Array)

        jobs = array.each_with_index.map do |options, i|
          raise InvalidSchedule, "cron schedule ##{i + 1} must be a Hash of options, got #{options.inspect}" unless options.is_a?(Hash)

          Job.new(options)
        end
        jobs.each(&:validate!)
        jobs.each(&:save)
      end

      # load_from_array, then removes the stored schedules `array` does not declare.
      def load_from_array!(array)
        jobs = load_from_array(array)
        destroy_others(jobs.map(&:name))
        jobs
      end

      # Loads a schedule file as sidekiq-cron's schedule loader reads `config/schedule.yml`: a Hash
      # of name => options, or an Array of options with names.
      def load_file(path = "config/schedule.yml")
        load_from_array(read_file(path))
      end

      private

      def declared = @declared ||= {}

      # A schedule file's schedules, as options with names.
      def read_file(path)
        require "yaml"
        schedule = YAML.load_file(path)
        case schedule
        when Hash then schedule.map { |name, options| with_name(name, options) }
        when Array then schedule
        when nil, false then []
        else raise InvalidSchedule, "#{path}: a cron schedule file holds a Hash or an Array, got #{schedule.class}"
        end
      rescue Psych::SyntaxError => e
        raise InvalidSchedule, "#{path}: not YAML: #{e.message}"
      end

      def with_name(name, options)
        raise InvalidSchedule, "cron schedule #{name.to_s.inspect} must be a Hash of options, got #{options.inspect}" unless options.is_a?(Hash)

        options.transform_keys(&:to_s).merge("name" => name.to_s)
      end

      def destroy_others(keep)
        Job.all.each { |job| job.destroy unless keep.include?(job.name) }
      end
    end

    # One schedule, as sidekiq-cron's Sidekiq::Cron::Job reads and writes it.
    class Job
      attr_reader :name, :cron, :klass, :description, :args, :queue, :message, :status, :last_enqueue_time

      class << self
        def all = JobQueue.engine.cron_all.map { |pairs| from_redis(pairs.to_h) }.sort_by(&:name)

        def count = all.size

        def find(name)
          pairs = JobQueue.engine.cron_find(name.to_s)
          pairs && from_redis(pairs.to_h)
        end

        def create(options)
          job = new(options)
          job.validate!
          job.save
        end

        def destroy(name) = JobQueue.engine.cron_destroy(name.to_s)

        # A schedule read back from its hash.
        def from_redis(fields)
          allocate.tap { |job| job.send(:read, fields) }
        end
      end

      def initialize(options)
        o = options.transform_keys(&:to_s)
        @name = o["name"].to_s
        @cron = o["cron"].to_s
        @klass = (o["klass"] || o["class"]).to_s
        @description = o["description"]
        @args = normalize_args(o["args"])
        @date_as_argument = flag?(o["date_as_argument"])
        @active_job = flag?(o["active_job"])
        @queue_name_prefix = o["queue_name_prefix"]
        @queue_name_delimiter = o["queue_name_delimiter"]
        @queue_option = o["queue"]&.to_s
        @status = o["status"]&.to_s
        @catch_up = flag?(o["catch_up"])
        @last_enqueue_time = nil
      end

      # Raises InvalidSchedule naming the schedule if it cannot be stored.
      def validate!
        raise InvalidSchedule, "a cron schedule needs a name" if @name.empty?
        raise InvalidSchedule, "cron schedule #{@name.inspect}: no cron string" if @cron.empty?
        raise InvalidSchedule, "cron schedule #{@name.inspect}: no class" if @klass.empty?

        begin
          JobQueue.engine.cron_check(@name, @cron)
        rescue ArgumentError => e
          raise InvalidSchedule, e.message
        end
        @message ||= build_message
        self
      end

      # Writes the schedule (sidekiq-cron's `save`): a stored schedule keeps its status and last
      # enqueue time unless given.
      def save
        validate!
        stored = JobQueue.engine.cron_find(@name)&.to_h || {}
        @status ||= stored["status"].to_s.empty? ? "enabled" : stored["status"]
        @last_enqueue_time ||= parse_time(stored["last_enqueue_time"])
        JobQueue.engine.cron_save(@name, to_hash.map { |k, v| [k.to_s, redis_value(v)] })
        self
      end

      def enable! = set_status(true)
      def disable! = set_status(false)
      def enabled? = @status == "enabled"
      def disabled? = !enabled?
      def active_job? = @active_job
      def date_as_argument? = @date_as_argument

      # Whether the latest tick missed while no server ran is pushed when one starts (see README).
      def catch_up? = @catch_up

      def destroy = JobQueue.engine.cron_destroy(@name)

      # Pushes the job now, whatever the status (sidekiq-cron's `enque!`). False if it is not stored.
      def run_now! = JobQueue.engine.cron_run_now(@name)
      alias_method :enque!, :run_now!

      # The next tick after now, as a UTC Time (nil for a cron string that never runs again).
      def next_time
        at = JobQueue.engine.cron_next_tick(@name, @cron)
        at && Time.at(at).utc
      end

      # `[{"jid" => ..., "enqueued" => ...}, ...]`, newest first.
      def jid_history = JobQueue.engine.cron_jid_history(@name).map { |raw| JSON.parse(raw) }

      # The hash sidekiq-cron's `to_hash` writes.
      def to_hash
        {
          name: @name, klass: @klass, cron: @cron, description: @description,
          args: JSON.generate(@args), date_as_argument: @date_as_argument,
          message: @message.is_a?(String) ? @message : JSON.generate(@message || {}),
          status: @status, active_job: @active_job,
          queue_name_prefix: @queue_name_prefix, queue_name_delimiter: @queue_name_delimiter,
          last_enqueue_time: @last_enqueue_time&.strftime(TIME_FORMAT), symbolize_args: false,
          catch_up: @catch_up
        }
      end

      private

      def set_status(enabled)
        JobQueue.engine.cron_set_status(@name, enabled)
        @status = enabled ? "enabled" : "disabled"
        self
      end

      def read(f)
        @name = f["name"].to_s
        @cron = f["cron"].to_s
        @klass = f["klass"].to_s
        @description = f["description"]
        @args = begin
          normalize_args(JSON.parse(f["args"].to_s))
        rescue JSON::ParserError
          [f["args"]].compact
        end
        @date_as_argument = flag?(f["date_as_argument"])
        @active_job = flag?(f["active_job"])
        @queue_name_prefix = f["queue_name_prefix"]
        @queue_name_delimiter = f["queue_name_delimiter"]
        @message = f["message"]
        @queue = begin
          JSON.parse(@message.to_s)["queue"] || "default"
        rescue JSON::ParserError
          "default"
        end
        @status = f["status"].to_s.empty? ? "enabled" : f["status"]
        @catch_up = flag?(f["catch_up"])
        @last_enqueue_time = parse_time(f["last_enqueue_time"])
      end

      def build_message
        klass = constantize!
        if defined?(::ActiveJob::Base) && klass.is_a?(Class) && klass < ::ActiveJob::Base
          @active_job = true
          @queue = @queue_option || klass.queue_name.to_s
          return { "class" => @klass, "args" => @args, "queue" => @queue }
        end
        unless klass.respond_to?(:get_sidekiq_options)
          raise InvalidSchedule, "cron schedule #{@name.inspect}: #{@klass} is not a worker (no get_sidekiq_options)"
        end

        options = klass.get_sidekiq_options.transform_keys(&:to_s)
        message = options.merge("class" => @klass, "args" => @args)
        message["queue"] = @queue_option if @queue_option
        @queue = (message["queue"] ||= "default").to_s
        message.merge(cron_context(klass))
      end

      # The "meta.*" fields GitLab's client middleware gives a job its cron poller pushes, which
      # runs in no request's context: a CronjobQueue worker's `caller_id` "Cronjob", and the
      # worker's feature category.
      def cron_context(klass)
        meta = {}
        meta["meta.caller_id"] = "Cronjob" if klass.respond_to?(:cronjob_queue?) && klass.cronjob_queue?
        category = klass.respond_to?(:get_feature_category) && klass.get_feature_category
        meta["meta.feature_category"] = category.to_s if category
        meta
      end

      def constantize!
        Object.const_get(@klass)
      rescue NameError
        raise InvalidSchedule, "cron schedule #{@name.inspect}: unknown class #{@klass}"
      end

      def normalize_args(args)
        case args
        when nil then []
        when Array then args
        when Hash then [args]
        when String
          begin
            parsed = JSON.parse(args)
            parsed.is_a?(Array) ? parsed : [parsed]
          rescue JSON::ParserError
            [args]
          end
        else [args]
        end
      end

      def flag?(value) = value == true || TRUE_FLAG.match?(value.to_s)

      def parse_time(text)
        return nil if text.nil? || text.to_s.empty?

        Time.strptime(text.to_s, TIME_FORMAT).utc
      rescue ArgumentError
        begin
          Time.parse(text.to_s).utc
        rescue ArgumentError
          nil
        end
      end

      # As redis-rb 4 writes a value: nil as "", anything else as its to_s.
      def redis_value(value) = value.nil? ? "" : value.to_s
    end
  end
end
