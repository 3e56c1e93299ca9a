# frozen_string_literal: true

require "json"

module JobQueue
  module Iterable
    # The `it-<jid>` hash in which Sidekiq 7.3 keeps an iterable job's progress, field for field:
    # "ex" (how many runs began), "c" (the cursor, as JSON), "rt" (seconds spent iterating, a Float)
    # and "cancelled" (the epoch second `cancel!` was first called). It lives 30 days from its last
    # write, as long as a job may wait through its retries. Read and written by the engine
    # (`Engine#iteration_*`, ext/queue_core/src/iterable), under `config.namespace`, so a job
    # interrupted under one server resumes under the other. This module formats and parses the values.
    module State
      TTL = 30 * 24 * 60 * 60

      # What a run starts from.
      Progress = Struct.new(:executions, :cursor, :runtime)

      module_function

      def key(jid)
        raise ArgumentError, "an iterable job needs its jid (got #{jid.inspect})" if jid.nil? || jid.to_s.empty?

        "it-#{jid}"
      end

      # The saved progress, or nil when the job has none (its first run, or a hash holding only
      # "cancelled").
      def load(jid)
        key(jid)
        fields = JobQueue.engine.iteration_load(jid.to_s) or return nil
        ex, cursor, runtime = fields
        Progress.new(ex.to_i, parse_cursor(jid, cursor), runtime.to_f)
      end

      # Writes the progress, renews the TTL, and returns the "cancelled" field (nil unless cancelled),
      # in one MULTI as Sidekiq does.
      def save(jid, progress)
        key(jid)
        JobQueue.engine.iteration_save(jid.to_s, progress.executions.to_i.to_s, JSON.generate(progress.cursor),
          progress.runtime.to_f.to_s)
      end

      # Marks the job cancelled (the first time only) and returns the epoch second it was.
      def cancel!(jid)
        key(jid)
        JobQueue.engine.iteration_cancel(jid.to_s, Time.now.to_i)
      end

      # The "cancelled" field: nil, or the epoch second as a String.
      def cancelled(jid)
        key(jid)
        JobQueue.engine.iteration_cancelled(jid.to_s)
      end

      def delete(jid)
        key(jid)
        JobQueue.engine.iteration_delete(jid.to_s)
      end

      def parse_cursor(jid, raw)
        return nil if raw.nil?

        JSON.parse(raw)
      rescue JSON::ParserError => e
        raise ArgumentError, "#{key(jid)} holds a cursor that is not JSON (#{raw.inspect[0, 100]}): #{e.message}"
      end
    end
  end
end
