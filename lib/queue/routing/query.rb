# frozen_string_literal: true

module JobQueue
  module Routing
    # One worker matching query, GitLab's syntax (doc/administration/sidekiq/
    # processing_specific_job_classes.md, "Worker matching query"), parsed once:
    #
    #   Query.new("resource_boundary!=cpu&urgency=high|tags=network,io").match?(attributes)
    #
    # The precedence is fixed: `|` splits first (OR), then `&` (AND), then each term is
    # `attribute=values` (any of) or `attribute!=values` (none of), values joined by `,`. A lone `*`
    # (spaces around it allowed) matches every worker. Values are words of letters, digits, `_` and `:`,
    # as GitLab's term pattern allows. `has_external_dependencies` reads only `true` as true, any other
    # value as false.
    #
    # Where GitLab ignores what follows a valid term (`urgency=high)`), or reads an empty query or
    # clause (`urgency=high||tags=a`) as matching nothing or everything, this raises InvalidTerm instead.
    class Query
      ATTRIBUTES = %w[worker_name name feature_category has_external_dependencies resource_boundary tags urgency queue_namespace].freeze
      WILDCARD = "*"
      TERM = /\A(\w+)(!?=)(.*)\z/m
      VALUE = /\A[\w:]+\z/
      INVALID_CHARACTER = /[^\w:]/

      Term = Struct.new(:attribute, :negated, :wanted) do
        def match?(attributes)
          hit = attributes.fetch(attribute).any? { |value| wanted.include?(value) }
          negated ? !hit : hit
        end
      end

      attr_reader :source

      def initialize(source)
        raise InvalidTerm, "the query must be a String, got #{source.inspect}" unless source.is_a?(String)

        @source = source
        @clauses = source.strip == WILDCARD ? nil : parse
      end

      # Whether a worker with these attributes (attribute name => Array of Strings, see
      # Routing.attributes) matches.
      def match?(attributes)
        return true if @clauses.nil?

        @clauses.any? { |terms| terms.all? { |term| term.match?(attributes) } }
      end

      def wildcard?
        @clauses.nil?
      end

      private

      # [[Term, ...], ...]: OR of ANDs.
      def parse
        raise InvalidTerm, "the query is empty" if @source.strip.empty?

        pieces(@source, "|", 0).map do |clause, at|
          pieces(clause, "&", at).map { |term, term_at| parse_term(term, term_at) }.freeze
        end.freeze
      end

      # The pieces of `text` between separators, each with its offset in the query; an empty text is
      # one empty piece (String#split would give none).
      def pieces(text, separator, offset)
        return [["", offset]] if text.empty?

        text.split(separator, -1).map do |piece|
          at = offset
          offset += piece.length + 1
          [piece, at]
        end
      end

      def parse_term(term, at)
        raise InvalidTerm, "empty term at #{where(at)}: | and & need a term on each side" if term.empty?
        raise InvalidTerm, "\"*\" matches all workers only as the whole query, at #{where(at)}" if term.strip == WILDCARD

        match = TERM.match(term)
        raise InvalidTerm, "invalid term #{term.inspect} at #{where(at)}: expected attribute=value or attribute!=value" unless match

        attribute, operator, list = match.captures
        unless ATTRIBUTES.include?(attribute)
          raise UnknownPredicate, "unknown attribute #{attribute.inspect} at #{where(at)} (known: #{ATTRIBUTES.join(", ")})"
        end

        values = parse_values(list, at + attribute.length + operator.length, term)
        Term.new(attribute, operator == "!=", normalize(attribute, values)).freeze
      end

      def parse_values(list, at, term)
        pieces(list, ",", at).map do |value, value_at|
          raise InvalidTerm, "empty value in #{term.inspect} at #{where(value_at)}" if value.empty?

          unless VALUE.match?(value)
            bad = value.index(INVALID_CHARACTER)
            raise InvalidTerm, "invalid character #{value[bad].inspect} in #{term.inspect} at #{where(value_at + bad)}: " \
              "values are letters, digits, _ and :, joined by ,"
          end
          value
        end
      end

      # Only the exact string "true" is true, as in GitLab.
      def normalize(attribute, values)
        values = values.map { |value| value == "true" ? "true" : "false" } if attribute == "has_external_dependencies"
        values.uniq.freeze
      end

      # "character N" (1-based) of the query.
      def where(offset)
        "character #{offset + 1}"
      end
    end
  end
end
