# frozen_string_literal: true

module JobQueue
  # The batches whose data has not expired, newest first (Sidekiq Pro's `Sidekiq::BatchSet`).
  class BatchSet
    include Enumerable

    PAGE = 100

    def initialize(config: JobQueue.config)
      @config = config
    end

    def size
      @config.engine.batch_list(0, 1).last
    end

    # One page: `count` statuses from `offset`.
    def page(offset, count)
      @config.engine.batch_list(offset, count).first.map { |bid, _| Batch::Status.new(bid, config: @config) }.select(&:exists?)
    end

    def each(&block)
      return enum_for(:each) unless block

      offset = 0
      loop do
        entries = @config.engine.batch_list(offset, PAGE).first
        break if entries.empty?

        entries.each { |bid, _| Batch::Status.new(bid, config: @config).then { |s| yield s if s.exists? } }
        offset += entries.size
      end
    end
  end
end
