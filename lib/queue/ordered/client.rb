# frozen_string_literal: true

module JobQueue
  module Ordered
    # `perform_async` of ordered workers: normalizes the jobs (Lowkiq's defaults), serializes their
    # payloads, and hands the whole bulk to the engine, which merges it in with one script call.
    module Client
      KEYS = %i[id payload score perform_in].freeze

      module_function

      def push(worker, jobs, engine: JobQueue.engine)
        engine.ordered_push(worker.queue_name, worker.shards_count, rows(worker, jobs))
      end

      # The jobs as [id, payload bytes, score, perform_in] rows (also the test modes' input).
      def rows(worker, jobs)
        raise ArgumentError, "#{worker}.perform_async takes an Array of job Hashes, got #{jobs.class}" unless jobs.is_a?(Array)

        now = Time.now.to_f
        jobs.each_with_index.map { |job, i| row(worker, job, i, now) }
      end

      # [id, payload bytes, score, perform_in].
      def row(worker, job, index, now)
        raise ArgumentError, "#{worker}.perform_async: job #{index} is a #{job.class}, not a Hash" unless job.is_a?(Hash)

        job = job.transform_keys(&:to_sym)
        unknown = job.keys - KEYS
        raise ArgumentError, "#{worker}.perform_async: job #{index} has unknown key(s) #{unknown.join(", ")}; use #{KEYS.join(", ")}" if unknown.any?
        raise ArgumentError, "#{worker}.perform_async: job #{index} has no id" if job[:id].nil?

        payload = worker.payload_codec.dump(job.fetch(:payload, ""), worker)
        [job[:id].to_s, payload, time(worker, job, :score, index, now), time(worker, job, :perform_in, index, now)]
      end

      def time(worker, job, key, index, now)
        value = job[key]
        return now if value.nil?

        value = value.to_f if value.is_a?(Time)
        return value.to_f if value.is_a?(Numeric) && value.to_f.finite?

        raise ArgumentError, "#{worker}.perform_async: job #{index} #{key} must be a finite number or a Time, got #{value.inspect}"
      end
    end
  end
end
