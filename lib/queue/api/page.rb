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
  end
end
