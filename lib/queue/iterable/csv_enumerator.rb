# frozen_string_literal: true

module JobQueue
  module Iterable
    # Enumerators over the rows of a CSV object, started at a row (or batch) index.
    # @api private
    class CsvEnumerator
      def initialize(csv)
        raise ArgumentError, "csv_enumerator takes a CSV object, got #{csv.class}" unless defined?(::CSV) && csv.instance_of?(::CSV)

        @csv = csv
      end

      def rows(cursor:)
        @csv.lazy.each_with_index.drop(start(cursor)).to_enum { line_count }
      end

      def batches(cursor:, batch_size: 100)
        raise ArgumentError, "batch_size must be a positive Integer, got #{batch_size.inspect}" unless batch_size.is_a?(Integer) && batch_size.positive?

        @csv.lazy.each_slice(batch_size).with_index.drop(start(cursor)).to_enum do
          count = line_count
          count && (count.to_f / batch_size).ceil
        end
      end

      private

      def start(cursor)
        return 0 if cursor.nil?
        return cursor if cursor.is_a?(Integer) && cursor >= 0

        raise ArgumentError, "the cursor of a CSV enumerator must be nil or an index (Integer >= 0), got #{cursor.inspect}"
      end

      # Rows in the file behind the CSV (nil for a CSV over a String), less the header line.
      def line_count
        path = @csv.path if @csv.respond_to?(:path)
        return nil unless path

        count = File.foreach(path).count
        @csv.headers ? count - 1 : count
      end
    end
  end
end
