# frozen_string_literal: true

require "optparse"
require_relative "command_options"

module JobQueue
  # `queue cron list`, `queue cron enable|disable|run NAME...`: the stored cron schedules
  # (JobQueue::Cron) from a shell. Redis settings come from the app (`-r`) or REDIS_URL; `run` pushes
  # the schedule's stored job, so it needs no app.
  class CronCommand
    USAGE = <<~TEXT
      Usage: queue cron list | queue cron enable|disable|run NAME...   [-r PATH] [-e ENV]
        list             every schedule: name, status, cron string, last and next run, class
        enable NAME...   the schedule runs on its ticks again
        disable NAME...  the schedule's ticks are not pushed until it is enabled
        run NAME...      pushes the schedule's job now, whatever its status
    TEXT
    ACTIONS = %w[list enable disable run].freeze
    TIME = "%Y-%m-%d %H:%M:%S UTC"

    def initialize(out: $stdout)
      @out = out
    end

    # `argv` after `cron`; `boot` loads the app. Returns the exit code.
    def run(argv, &boot)
      options = {}
      action, *names = parser(options).parse(argv)
      return 0 if options[:exit]
      raise ArgumentError, "queue cron needs an action\n#{USAGE}" if action.nil?
      raise ArgumentError, "unknown queue cron action #{action.inspect}\n#{USAGE}" unless ACTIONS.include?(action)

      boot&.call(options)
      if action == "list"
        raise ArgumentError, "queue cron list takes no NAME\n#{USAGE}" unless names.empty?

        list
      else
        raise ArgumentError, "queue cron #{action} needs a schedule NAME\n#{USAGE}" if names.empty?

        jobs = names.map { |name| find!(name) }
        jobs.each { |job| @out.puts "#{job.name}: #{change(action, job)}" }
      end
      0
    end

    private

    def find!(name)
      Cron::Job.find(name) or
        raise ArgumentError, "no cron schedule named #{name.inspect} (queue cron list shows them)"
    end

    def change(action, job)
      case action
      when "enable"
        was = job.enabled?
        job.enable!
        was ? "already enabled" : "enabled"
      when "disable"
        was = job.disabled?
        job.disable!
        was ? "already disabled" : "disabled"
      else
        job.run_now! ? "pushed to #{job.queue}" : "gone before it could be pushed"
      end
    end

    def list
      rows = Cron::Job.all.map do |job|
        [job.name, job.status, job.cron, time(job.last_enqueue_time), job.enabled? ? time(next_time(job)) : "-", job.klass]
      end
      return @out.puts("No cron schedules.") if rows.empty?

      rows.unshift(%w[NAME STATUS CRON LAST NEXT CLASS])
      widths = rows.transpose.map { |column| column.map(&:length).max }
      rows.each { |row| @out.puts row.zip(widths).map { |cell, width| cell.ljust(width) }.join("  ").rstrip }
    end

    # A schedule stored by another tool may have a cron string we cannot read: shown, not fatal.
    def next_time(job)
      job.next_time
    rescue ArgumentError
      nil
    end

    def time(at) = at ? at.utc.strftime(TIME) : "-"

    def parser(options) = CommandOptions.parser(USAGE, options, @out)
  end
end
