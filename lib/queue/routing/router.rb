# frozen_string_literal: true

module JobQueue
  module Routing
    # `config.routing_rules`, compiled once: an ordered list of `[query, queue]` or
    # `[query, queue, shard]`. The first rule whose query matches a worker gives its queue (nil or ""
    # for the worker's own generated queue) and its shard (nil for none); a worker no rule matches keeps
    # its own queue and no shard. Each rule is checked here, and a bad one raises (an Error, which is an
    # ArgumentError) naming its index, the rule, and what is wrong where.
    class Router
      Rule = Struct.new(:query, :queue, :shard)

      QUEUE_NAME = /\A[^\s,]+\z/

      # The rules as given, deep-frozen.
      attr_reader :rules

      def initialize(rules)
        unless rules.is_a?(Array)
          raise InvalidRoutingRule, "routing_rules must be an Array of [query, queue] or [query, queue, shard], got #{rules.inspect}"
        end

        @compiled = rules.each_with_index.map do |rule, index|
          compile(rule)
        rescue Error => e
          raise e.class, "routing_rules[#{index}] #{rule.inspect}: #{e.message}"
        end.freeze
        @rules = rules.map { |rule| rule.map { |part| part.dup.freeze }.freeze }.freeze
      end

      def empty?
        @compiled.empty?
      end

      # Whether the last rule is `*`, so no worker falls through to its own queue unrouted.
      def catch_all?
        @compiled.last&.query&.wildcard? || false
      end

      # [queue, shard] for a worker with these attributes (Routing.attributes) whose own queue is
      # `own_queue`.
      def route(attributes, own_queue)
        rule = @compiled.find { |candidate| candidate.query.match?(attributes) }
        rule ? [rule.queue || own_queue, rule.shard] : [own_queue, nil]
      end

      private

      def compile(rule)
        raise InvalidRoutingRule, "a rule is [query, queue] or [query, queue, shard]" unless rule.is_a?(Array) && rule.length.between?(2, 3)

        query, queue, shard = rule
        Rule.new(Query.new(query), queue_name(queue), shard_name(shard)).freeze
      end

      # nil for the worker's own queue (nil or blank, as GitLab's `presence`).
      def queue_name(queue)
        raise InvalidRoutingRule, "the queue must be a String, a Symbol or nil, got #{queue.inspect}" unless queue.nil? || queue.is_a?(String) || queue.is_a?(Symbol)

        name = queue.to_s
        return nil if name.strip.empty?
        raise InvalidRoutingRule, "queue #{name.inspect} is not a queue name (no spaces or commas)" unless QUEUE_NAME.match?(name)

        -name
      end

      def shard_name(shard)
        return nil if shard.nil?
        raise InvalidRoutingRule, "the shard must be a non-empty String or nil, got #{shard.inspect}" unless shard.is_a?(String) && !shard.strip.empty?

        -shard
      end
    end
  end
end
