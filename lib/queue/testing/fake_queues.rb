# frozen_string_literal: true

module JobQueue
  module Testing
    # Fake mode's jobs, indexed both by queue and by worker class name. `Worker.jobs` returns the
    # class's own array (not a copy), so `expect { ... }.to change(HardWorker.jobs, :size)` works.
    module FakeQueues
      @by_queue = Hash.new { |hash, queue| hash[queue] = [] }
      @by_class = Hash.new { |hash, name| hash[name] = [] }
      @lock = Mutex.new

      class << self
        # Jobs of one queue, oldest first.
        def [](queue)
          @by_queue[queue.to_s]
        end

        # Jobs of one worker class (by name), oldest first.
        def for_class(name)
          @by_class[name.to_s]
        end

        def push(job)
          @lock.synchronize do
            @by_queue[job["queue"]] << job
            @by_class[job["class"]] << job
          end
        end

        # Every job, oldest first within each queue.
        def all
          @by_queue.values.flatten
        end

        # Takes the oldest job of one worker class out of both indexes; nil if it has none.
        def shift(name)
          @lock.synchronize do
            job = @by_class[name.to_s].shift or return nil
            @by_queue[job["queue"]].delete_if { |j| j.equal?(job) }
            job
          end
        end

        # Removes one worker class's jobs (and only them: other classes' jobs in the same queue stay).
        def clear_class(name)
          @lock.synchronize do
            jobs = @by_class[name.to_s]
            mine = {}.compare_by_identity
            jobs.each { |job| mine[job] = true }
            @by_queue.each_value { |queue| queue.delete_if { |job| mine.key?(job) } }
            jobs.clear
          end
        end

        # Empties every array in place (arrays tests hold stay valid).
        def clear_all
          @lock.synchronize do
            @by_queue.each_value(&:clear)
            @by_class.each_value(&:clear)
          end
        end
      end
    end
  end
end
