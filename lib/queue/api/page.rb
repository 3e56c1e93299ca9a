# frozen_string_literal: true

module JobQueue
  # One page of a queue or a job set, as `Queue#page` and `JobSet#page` return it.
  #
  # - `entries`: JobRecords (queues) or SortedEntries (sets), newest first;
  # - `total`: the size of the whole queue or set (not of the filtered entries: counting those would
  #   read every job);
  # - `next_offset`: where the next page starts, or nil after the last one. With a filter, pass it back
  #   as `offset` to continue the search.
  Page = Struct.new(:entries, :total, :next_offset) do
    include Enumerable

    def each(&block) = entries.each(&block)

    def size = entries.size

    def last_page? = next_offset.nil?

    # A page of a queue or set of `total` entries: with no `filter`, `read.call(offset, count)`'s rows;
    # else `search.call(filter, offset, window, count)`, which returns where it stopped and its rows.
    # `wrap` makes each row an entry.
    def self.build(offset, count, total, filter:, window:, read:, search:, wrap:)
      API.count!("offset", offset)
      API.count!("count", count)
      if filter.nil? || filter.to_s.empty?
        entries = read.call(offset, count).map(&wrap)
        following = offset + entries.size
        return new(entries, total, following < total && entries.size == count ? following : nil)
      end

      following, found = search.call(filter.to_s, offset, window, count)
      new(found.map(&wrap), total, following)
    end
  end
end
