# frozen_string_literal: true

module JobQueue
  module Iterable
    # Enumerators over an ActiveRecord::Relation through its batching methods, started at the record
    # whose id is the cursor (`start:`). Options (`batch_size:`, `finish:`, ...) go to those methods.
    # @api private
    class ActiveRecordEnumerator
      def initialize(relation, cursor: nil, **options)
        unless relation.respond_to?(:find_each) && relation.respond_to?(:in_batches)
          raise ArgumentError, "an ActiveRecord::Relation is needed, got #{relation.class}"
        end

        @relation = relation
        @cursor = cursor
        @options = options
      end

      def records
        Enumerator.new(-> { @relation.count }) do |out|
          @relation.find_each(**@options, start: @cursor) { |record| out.yield(record, record.id) }
        end
      end

      def batches
        Enumerator.new(-> { @relation.count }) do |out|
          @relation.find_in_batches(**@options, start: @cursor) { |batch| out.yield(batch, batch.first.id) }
        end
      end

      # `in_batches` calls its size `of:`; `batch_size:` is taken for it, as for the other two.
      def relations
        options = @options.dup
        of = options.delete(:batch_size)
        options[:of] ||= of if of
        Enumerator.new(-> { batch_count }) do |out|
          @relation.in_batches(**options, start: @cursor) { |batch| out.yield(batch, batch.first.id) }
        end
      end

      private

      def batch_count
        size = @options[:batch_size] || 1000
        (@relation.count + size - 1) / size
      end
    end
  end
end
