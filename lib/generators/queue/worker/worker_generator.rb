# frozen_string_literal: true

require "rails/generators/named_base"

module JobQueue
  module Generators
    # `bin/rails g queue:worker Name [--idempotent | --ordered] [--queue NAME] [--no-spec]`:
    # app/workers/name_worker.rb and spec/workers/name_worker_spec.rb (namespaced names such as
    # Admin::Cleanup go under app/workers/admin/). The spec only where RSpec is set up (rspec-core in
    # the bundle, spec/rails_helper.rb or spec/spec_helper.rb); otherwise a note says what to add.
    # Three flavours:
    #
    # - plain: `include JobQueue::Worker`; its spec runs it through the fake and inline test modes.
    # - --idempotent: `include JobQueue::ApplicationWorker` + `idempotent!` (GitLab's style: a queue
    #   named after the class, duplicates dropped); its spec uses `it_behaves_like "an idempotent worker"`.
    # - --ordered: `extend JobQueue::OrderedWorker` (Lowkiq's `perform(payloads_by_id)`); its spec uses
    #   `it_behaves_like "an ordered worker"` and the test modes.
    class WorkerGenerator < ::Rails::Generators::NamedBase
      namespace "queue:worker"
      source_root File.expand_path("templates", __dir__)

      desc "Creates a queue worker in app/workers and its spec in spec/workers."

      class_option :idempotent, type: :boolean, default: false,
        desc: "A JobQueue::ApplicationWorker declared idempotent! (duplicate jobs dropped)"
      class_option :ordered, type: :boolean, default: false,
        desc: "A JobQueue::OrderedWorker: each id's payloads in order, one id never run twice at once"
      class_option :queue, type: :string,
        desc: "The queue (ordered workers: the queue name); default: \"default\", an idempotent worker's own name"
      class_option :spec, type: :boolean, default: true, desc: "Create spec/workers/..._spec.rb"

      # A bad option exits 1 (Thor's default for generators is 0).
      def self.exit_on_failure?
        true
      end

      check_class_collision suffix: "Worker"

      def check_options
        if options[:idempotent] && options[:ordered]
          raise Thor::Error, "queue:worker: --idempotent and --ordered do not go together: an ordered worker " \
            "(JobQueue::OrderedWorker) is not a JobQueue::ApplicationWorker and has no deduplication; its " \
            "jobs merge by id instead. Choose one."
        end
        queue = options[:queue]
        return if queue.nil? || queue.match?(/\A[A-Za-z0-9_.:\-]+\z/)

        raise Thor::Error, "queue:worker: --queue must be a queue name of letters, digits, _ . : or -, got #{queue.inspect}"
      end

      def create_worker_file
        template "#{flavour}_worker.rb", worker_path
      end

      # Only where RSpec can run it: rspec-core in the app's bundle and a spec helper to require. Without
      # them the spec is left out and the note says what to add.
      def create_spec_file
        return unless options[:spec]

        note = missing_rspec
        note ? say_status(:skip, note, :yellow) : template("#{flavour}_worker_spec.rb", spec_path)
      end

      def remind_of_queues
        queue = options[:queue]
        return if queue.nil? || options[:ordered] || queue == "default"

        say_status :note, "a server fetches from #{queue.inspect} only if it is in :queues: (config/queue.yml) " \
          "or -q, or, with neither, if an ApplicationWorker uses it", :yellow
      end

      private

      def flavour
        return "ordered" if options[:ordered]

        options[:idempotent] ? "idempotent" : "plain"
      end

      # "Cleanup", "CleanupWorker" and "cleanup_worker" all make CleanupWorker.
      def file_name
        @file_name_without_suffix ||= super.sub(/_?worker\z/i, "")
      end

      def worker_class_name
        "#{class_name}Worker"
      end

      # The queue JobQueue::ApplicationWorker derives from the class name: Admin::CleanupWorker → admin_cleanup.
      def idempotent_queue
        class_name.underscore.tr("/", "_")
      end

      def spec_helper
        %w[rails_helper spec_helper].find { |helper| File.exist?(File.join(destination_root, "spec", "#{helper}.rb")) }
      end

      def worker_path
        File.join("app/workers", class_path, "#{file_name}_worker.rb")
      end

      # A re-run with --skip that adds the spec of a worker written before finds the worker's class
      # defined by that file: the worker itself, not a collision.
      def class_collisions(*names)
        return if options[:skip] && File.exist?(File.join(destination_root, worker_path))

        super
      end

      def spec_path
        File.join("spec/workers", class_path, "#{file_name}_worker_spec.rb")
      end

      # Why the spec cannot be written, and what to add; nil when RSpec is there.
      def missing_rspec
        then_rerun = "then `#{rerun_command}` writes it (--no-spec leaves specs out without this note)"
        unless Gem.loaded_specs.key?("rspec-core")
          return "#{spec_path}: this app has no RSpec (rspec-core is not in its bundle). To add it, put " \
            "`gem \"rspec-rails\"` in the Gemfile's `group :development, :test`, run `bundle install` and " \
            "`bin/rails g rspec:install`; #{then_rerun}"
        end
        return nil if spec_helper

        "#{spec_path}: RSpec is in the bundle but there is no spec/rails_helper.rb or spec/spec_helper.rb to " \
          "require. Run `bin/rails g rspec:install` (rspec-rails), or write a spec/spec_helper.rb that requires " \
          "config/environment; #{then_rerun}"
      end

      # This generator's command again, with --skip so the worker file is left as it is.
      def rerun_command
        flags = [("--idempotent" if options[:idempotent]), ("--ordered" if options[:ordered]),
          ("--queue #{options[:queue]}" if options[:queue])].compact
        ["bin/rails g queue:worker", name, *flags, "--skip"].join(" ")
      end
    end
  end
end
