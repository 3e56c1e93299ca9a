# frozen_string_literal: true

require_relative "active_record_enumerator"
require_relative "csv_enumerator"

module JobQueue
  module Iterable
    # Sidekiq 7.3's enumerator builders for `build_enumerator`. Each returns an Enumerator that yields
    # `(item, cursor)` and starts at the given cursor (nil: from the beginning); the cursor saved for an
    # item is where iteration resumes, that item included.
    module Enumerators
      # Items of an Array; the cursor is the item's index.
      def array_enumerator(array, cursor:)
        raise ArgumentError, "array_enumerator takes an Array, got #{array.class}" unless array.is_a?(Array)

        pairs = array.each_with_index.drop(offset(cursor, "array_enumerator"))
        pairs.to_enum { pairs.size }
      end

      # One record at a time (`find_each`); the cursor is the record's id.
      def active_record_records_enumerator(relation, cursor:, **options)
        ActiveRecordEnumerator.new(relation, cursor: cursor, **options).records
      end

      # Arrays of records (`find_in_batches`, `batch_size:`); the cursor is the batch's first id.
      def active_record_batches_enumerator(relation, cursor:, **options)
        ActiveRecordEnumerator.new(relation, cursor: cursor, **options).batches
      end

      # Relations of up to `batch_size:` records (`in_batches`); the cursor is the batch's first id.
      def active_record_relations_enumerator(relation, cursor:, **options)
        ActiveRecordEnumerator.new(relation, cursor: cursor, **options).relations
      end

      # Rows of a CSV object; the cursor is the row's index.
      def csv_enumerator(csv, cursor:)
        CsvEnumerator.new(csv).rows(cursor: cursor)
      end

      # Arrays of up to `batch_size:` (100) rows; the cursor is the batch's index.
      def csv_batches_enumerator(csv, cursor:, **options)
        CsvEnumerator.new(csv).batches(cursor: cursor, **options)
      end

      private

      def offset(cursor, builder)
        return 0 if cursor.nil?
        return cursor if cursor.is_a?(Integer) && cursor >= 0

        raise ArgumentError, "#{builder}: the cursor must be nil or an index (Integer >= 0), got #{cursor.inspect}"
      end
    end
  end
end
