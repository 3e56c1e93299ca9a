# frozen_string_literal: true

require_relative "launcher"

module JobQueue
  # A server running inside another program, such as a Puma worker: `JobQueue.configure_embed`
  # returns one, `run` starts it beside the host's threads and returns, `stop` ends it as TERM ends
  # `bundle exec queue`. The Launcher underneath is the CLI's; what the CLI adds around it is not
  # done here, as in Sidekiq 7's Sidekiq::Embedded:
  #
  # - no signal is trapped (the host owns them: its shutdown hook calls `stop`);
  # - the process title stays the host's;
  # - quiet and stop sent from a dashboard are not acted on (a process marked `embedded` shows it);
  # - systemd's NOTIFY_SOCKET is left to the host (READY, STOPPING and watchdog pings are its own).
  class Embedded
    attr_reader :config

    def initialize(config = JobQueue.config)
      @config = config
      @launcher = nil
    end

    # Starts the processor threads and the engine's background work in this process, and returns.
    # Raises JobQueue::Error when already started (one embedded server per process). A start that
    # fails half-way (a startup hook raised after the engine registered) stops what it started.
    def run
      raise Error, "this embedded server already runs; call stop before run" if @launcher

      rails_setup
      launcher = Launcher.new(@config, embedded: true)
      begin
        launcher.run
      rescue StandardError
        launcher.stop if launcher.started?
        raise
      end
      @launcher = launcher
      @config.logger.info("queue running embedded in #{$PROGRAM_NAME} (pid #{::Process.pid})")
      self
    end

    # Whether `run` was called and `stop` not yet.
    def running?
      !@launcher.nil?
    end

    # The identity of the process entry in Redis (nil before `run`).
    def identity
      @launcher&.identity
    end

    # Stop taking new jobs; running ones finish.
    def quiet
      @launcher&.quiet
    end

    # Quiet, wait up to `config.timeout` for running jobs, put back the rest; returns how many went
    # back (0 when not running).
    def stop
      launcher = @launcher or return 0
      @launcher = nil
      launcher.started? ? launcher.stop : 0
    end

    private

    # In a booted Rails app (Puma serving it), each job runs inside the app's reloader, as under
    # `bundle exec queue`: ActiveRecord connections go back to the pool after each job.
    def rails_setup
      return unless defined?(::Rails::Railtie) && ::Rails.respond_to?(:application)

      app = ::Rails.application
      return unless app&.initialized?

      require_relative "rails_integration/server"
      RailsIntegration::Server.setup(app, @config, embedded: true)
    end
  end
end
