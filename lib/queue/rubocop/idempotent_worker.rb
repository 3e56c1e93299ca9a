# frozen_string_literal: true

module RuboCop
  module Cop
    module JobQueue
      # Every worker that includes ApplicationWorker must declare itself `idempotent!` (a job may
      # run more than once: retries, recovery after a crash, at-least-once delivery), or say in a
      # disable comment why it cannot.
      #
      # A disable counts only with a reason: text of at least REASON_MIN characters after ` -- ` in
      # the directive that disables this cop for the class's line (the same line, or the nearest
      # `rubocop:disable` above it). A disable without one is ignored and the worker is reported.
      #
      # @example
      #   # bad
      #   class ExportWorker
      #     include ApplicationWorker
      #     def perform(id) = Export.find(id).run!
      #   end
      #
      #   # good
      #   class ExportWorker
      #     include ApplicationWorker
      #     idempotent!
      #     def perform(id) = Export.find(id).run!
      #   end
      #
      #   # good
      #   class MailerWorker # rubocop:disable JobQueue/IdempotentWorker -- sends an email on each run
      #     include ApplicationWorker
      #   end
      class IdempotentWorker < Base
        MSG = "Declare the worker `idempotent!` (it may run more than once), or disable " \
              "JobQueue/IdempotentWorker with a reason: `# rubocop:disable JobQueue/IdempotentWorker -- <why>`."
        REASON_MIN = 10
        DIRECTIVE = /#\s*rubocop\s*:\s*disable\b(?<cops>[^-]*?)(?:\s--\s*(?<reason>.*))?\z/

        # @!method application_worker?(node)
        def_node_matcher :application_worker?, <<~PATTERN
          (const {nil? cbase (const {nil? cbase} :JobQueue)} :ApplicationWorker)
        PATTERN

        # @!method include_call?(node)
        def_node_matcher :include_call?, "(send nil? :include $...)"

        # @!method idempotent_call?(node)
        def_node_matcher :idempotent_call?, "(send {nil? self} :idempotent! ...)"

        def on_class(node)
          statements = body_statements(node)
          return unless statements.any? { |s| include_call?(s)&.any? { |arg| application_worker?(arg) } }
          return if statements.any? { |s| idempotent_call?(s) }

          add_offense(node.loc.keyword.join(node.identifier.source_range))
        end

        private

        def body_statements(node)
          body = node.body
          return [] unless body

          body.begin_type? ? body.children : [body]
        end

        # A line is disabled for this cop only by a directive that gives a reason.
        def enabled_line?(line)
          return true if super

          directive = nearest_directive(line)
          directive.nil? || !reasoned?(directive)
        end

        # The last `rubocop:disable` naming this cop (or its department, or all) on or above `line`.
        def nearest_directive(line)
          processed_source.comments.reverse_each.find do |comment|
            next false if comment.loc.line > line

            match = DIRECTIVE.match(comment.text)
            match && names_this_cop?(match[:cops])
          end
        end

        def names_this_cop?(cops)
          cops.split(",").map(&:strip).any? { |cop| [cop_name, "JobQueue", "all"].include?(cop) }
        end

        def reasoned?(comment)
          reason = DIRECTIVE.match(comment.text)[:reason].to_s.strip
          reason.length >= REASON_MIN
        end
      end
    end
  end
end
