# frozen_string_literal: true

require "rails/generators/named_base"

module JobQueue
  module Generators
    # `bin/rails g queue:worker Name [--idempotent | --ordered] [--queue NAME] [--no-spec]`:
    # app/workers/name_worker.rb and spec/workers/name_worker_spec.rb (namespaced names such as
    # Admin::Cleanup go under app/workers/admin/). Three flavours:
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
        template "#{flavour}_worker.rb", File.join("app/workers", class_path, "#{file_name}_worker.rb")
      end

      def create_spec_file
        return unless options[:spec]

        template "#{flavour}_worker_spec.rb", File.join("spec/workers", class_path, "#{file_name}_worker_spec.rb")
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
        File.exist?(File.join(destination_root, "spec", "rails_helper.rb")) ? "rails_helper" : "spec_helper"
      end
    end
  end
end
