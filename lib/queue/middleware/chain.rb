# frozen_string_literal: true

module JobQueue
  module Middleware
    # An ordered list of middleware classes, each instantiated per invocation with the arguments it
    # was added with, as Sidekiq does.
    #
    # Client middleware: `call(worker_class, job, queue, redis_pool)`; server middleware:
    # `call(worker, job, queue)`. Each must `yield` to continue; a client middleware that does not
    # yield stops the push.
    class Chain
      include Enumerable

      Entry = Struct.new(:klass, :args) do
        def make_new
          klass.new(*args)
        end
      end

      def initialize
        @entries = []
        yield self if block_given?
      end

      def initialize_copy(other)
        super
        @entries = other.entries.dup
      end

      attr_reader :entries
      protected :entries

      def each(&block)
        @entries.map(&:klass).each(&block)
      end

      def add(klass, *args)
        remove(klass)
        @entries << Entry.new(klass, args)
      end

      def prepend(klass, *args)
        remove(klass)
        @entries.unshift(Entry.new(klass, args))
      end

      def insert_before(oldklass, newklass, *args)
        insert_at(oldklass, newklass, args, 0)
      end

      def insert_after(oldklass, newklass, *args)
        insert_at(oldklass, newklass, args, 1)
      end

      def remove(klass)
        @entries.delete_if { |e| e.klass == klass }
      end

      def exists?(klass)
        @entries.any? { |e| e.klass == klass }
      end
      alias_method :include?, :exists?

      def empty?
        @entries.empty?
      end

      def clear
        @entries.clear
      end

      # Runs the chain around the block; returns the block's value, or nil if a middleware stopped.
      def invoke(*args)
        return yield if @entries.empty?

        chain = @entries.map(&:make_new)
        traverse = lambda do
          if chain.empty?
            yield
          else
            chain.shift.call(*args, &traverse)
          end
        end
        traverse.call
      end

      private

      def insert_at(oldklass, newklass, args, offset)
        entry = @entries.find { |e| e.klass == newklass } || Entry.new(newklass, args)
        @entries.delete(entry)
        index = @entries.index { |e| e.klass == oldklass } || (offset.zero? ? 0 : @entries.size - 1)
        @entries.insert(index + offset, entry)
      end
    end
  end
end
