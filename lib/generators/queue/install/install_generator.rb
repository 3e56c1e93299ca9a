# frozen_string_literal: true

require "rails/generators/base"

module JobQueue
  # (Not `Queue::Generators`: Ruby's ::Queue is a class. `namespace` gives the generators their names.)
  module Generators
    # `bin/rails g queue:install`: config/queue.yml (Redis and the server's options, per environment)
    # and config/initializers/queue.rb (configure_server / configure_client). With --active-job,
    # config/application.rb also gets `config.active_job.queue_adapter = :queue`. Re-running it
    # leaves identical files alone and asks before changing an edited one (Rails' conflict handling).
    class InstallGenerator < ::Rails::Generators::Base
      namespace "queue:install"
      source_root File.expand_path("templates", __dir__)

      desc "Creates config/queue.yml and config/initializers/queue.rb for queue (background jobs)."

      # A bad option exits 1 (Thor's default for generators is 0).
      def self.exit_on_failure?
        true
      end

      class_option :active_job, type: :boolean, default: false,
        desc: "Also set config.active_job.queue_adapter = :queue in config/application.rb"

      def create_config_file
        template "queue.yml", "config/queue.yml"
      end

      def create_initializer
        template "initializer.rb", "config/initializers/queue.rb"
      end

      def set_active_job_adapter
        return unless options[:active_job]

        path = "config/application.rb"
        line = "config.active_job.queue_adapter = :queue"
        current = File.read(File.join(destination_root, path))
        if current.include?(line)
          say_status :identical, "#{path} (#{line})", :blue
        elsif current.match?(/^\s*config\.active_job\.queue_adapter\s*=.*$/)
          gsub_file path, /^(\s*)config\.active_job\.queue_adapter\s*=.*$/, "\\1#{line}"
        else
          application line
        end
      end

      def show_next_steps
        say <<~TEXT

          queue is set up: config/queue.yml has the Redis URL (REDIS_URL) and the server's options.
            bin/rails g queue:worker Name [--idempotent | --ordered] [--queue NAME]   a worker and its spec
            bundle exec queue                                                     starts a server
        TEXT
        say "  ActiveJob: run again with --active-job, or set config.active_job.queue_adapter = :queue" unless options[:active_job]
      end
    end
  end
end
