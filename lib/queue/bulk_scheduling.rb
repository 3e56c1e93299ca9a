# frozen_string_literal: true

module JobQueue
  # GitLab's bulk helpers for ApplicationWorker classes. Each pushes its jobs in bulk (one round trip
  # per 1,000 jobs) and returns their jids.
  #
  #   SyncWorker.bulk_perform_async([[1], [2]])
  #   SyncWorker.bulk_perform_in(300, [[1], [2]])
  #   ProjectImportScheduleWorker.bulk_perform_async_with_contexts(
  #     projects,
  #     arguments_proc: ->(project) { project.id },
  #     context_proc: ->(project) { {project: project} }
  #   )
  #
  # With contexts, each job carries the context its own object gives (merged over the current one).
  module BulkScheduling
    BATCH_KEY = :job_queue_batch_contexts

    def bulk_perform_async(args_list)
      perform_bulk(check_args_list!(args_list))
    end

    # Runs the jobs `delay` seconds from now; the delay must be positive. With `batch_size:` and
    # `batch_delay:` (as GitLab has them), each further `batch_size` jobs run `batch_delay` seconds later.
    def bulk_perform_in(delay, args_list, batch_size: nil, batch_delay: nil)
      unless delay.is_a?(Numeric) && delay.to_f.positive?
        raise ArgumentError, "#{name}.bulk_perform_in: the delay must be a positive number of seconds, got #{delay.inspect}"
      end

      args_list = check_args_list!(args_list)
      return set(wait: delay.to_f).perform_bulk(args_list) if batch_size.nil? && batch_delay.nil?

      start = Time.now.to_f + delay.to_f
      step = batch_step!(batch_size, batch_delay)
      ats = Array.new(args_list.size) { |i| start + (i / batch_size) * step }
      args_list.each_slice(Client::BULK_SLICE).with_index.flat_map do |slice, n|
        Client.new.push_bulk("class" => self, "args" => slice, "at" => ats[n * Client::BULK_SLICE, slice.size])
      end
    end

    def bulk_perform_async_with_contexts(objects, arguments_proc:, context_proc:)
      with_batch_contexts(objects, arguments_proc, context_proc) { |args_list| bulk_perform_async(args_list) }
    end

    def bulk_perform_in_with_contexts(delay, objects, arguments_proc:, context_proc:)
      with_batch_contexts(objects, arguments_proc, context_proc) { |args_list| bulk_perform_in(delay, args_list) }
    end

    private

    def batch_step!(batch_size, batch_delay)
      unless batch_size.is_a?(Integer) && batch_size.positive? && batch_delay.is_a?(Numeric) && batch_delay.to_f.positive?
        raise ArgumentError, "#{name}.bulk_perform_in: batch_size (a positive Integer) and batch_delay (positive seconds) " \
          "go together, got batch_size: #{batch_size.inspect}, batch_delay: #{batch_delay.inspect}"
      end

      batch_delay.to_f
    end

    def check_args_list!(args_list)
      return args_list if args_list.is_a?(Array) && args_list.all?(Array)

      raise ArgumentError, "#{name}: bulk scheduling needs an Array of argument Arrays, got #{args_list.inspect[0, 200]}"
    end

    # The context of the job with `args` inside a `*_with_contexts` call on this thread, or nil. Jobs
    # are pushed in the order of the objects, so each takes the next context; equal arguments from
    # different objects still get their own object's context.
    def batch_context_for(args)
      batch = Thread.current[BATCH_KEY]&.[](self) or return nil
      entry = batch[:entries][batch[:next]]
      return nil unless entry && entry.first == args

      batch[:next] += 1
      entry.last
    end

    def with_batch_contexts(objects, arguments_proc, context_proc)
      current = Context.current
      entries = objects.map do |object|
        args = arguments_proc.call(object)
        args = [args] unless args.is_a?(Array)
        context = context_proc.call(object)
        raise ArgumentError, "#{name}: context_proc must return a Hash, got #{context.inspect[0, 100]}" unless context.is_a?(Hash)

        [args, Context.merge(current, context)]
      end
      batches = (Thread.current[BATCH_KEY] ||= {})
      previous = batches[self]
      batches[self] = {entries: entries, next: 0}
      begin
        yield entries.map(&:first)
      ensure
        previous ? batches[self] = previous : batches.delete(self)
      end
    end
  end
end
