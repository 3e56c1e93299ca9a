# frozen_string_literal: true

module JobQueue
  class Web
    # One page of a list: which page (from `?page=`, 1-based), how many per page (`?per=`), the
    # total when known, and the links between pages.
    class Paging
      PER_PAGE = [25, 50, 100].freeze

      attr_reader :page, :per, :total

      def initialize(params, total: nil)
        @per = PER_PAGE.include?(params["per"].to_i) ? params["per"].to_i : PER_PAGE.first
        @page = [params["page"].to_i, 1].max
        @total = total
        @page = [@page, pages].min if total && pages.positive?
      end

      def offset = (page - 1) * per

      def pages = total ? (total.to_f / per).ceil : nil

      def first = total&.zero? ? 0 : offset + 1

      # The last entry's number on this page, given how many the page holds.
      def last(shown) = offset + shown

      def prev? = page > 1

      def next?(shown) = total ? page < pages : shown == per

      # Page numbers to link: the first, the last, and two either side of this one; nil for a gap.
      def window
        return [] unless total && pages > 1

        near = ((page - 2)..(page + 2)).select { |n| n.between?(1, pages) }
        numbers = ([1] + near + [pages]).uniq.sort
        numbers.each_with_object([]) do |n, out|
          out << nil if out.any? && out.last && n > out.last + 1
          out << n
        end
      end
    end
  end
end
