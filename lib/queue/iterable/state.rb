# frozen_string_literal: true

require "json"

module JobQueue
  module Iterable
    # The `it-<jid>` hash in which Sidekiq 7.3 keeps an iterable job's progress, field for field:
    # "ex" (how many runs began), "c" (the cursor, as JSON), "rt" (seconds spent iterating, a Float)
    # and "cancelled" (the epoch second `cancel!` was first called). It lives 30 days from its last
    # write, as long as a job may wait through its retries. Read and written through JobQueue.redis
    # (the redis gem's connections, namespaced as Sidekiq's are), so a job interrupted under one server
    # resumes under the other.
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
        fields = JobQueue.redis { |conn| conn.hgetall(key(jid)) }
        return nil unless fields.key?("c") || fields.key?("ex")

        Progress.new(fields["ex"].to_i, parse_cursor(jid, fields["c"]), fields["rt"].to_f)
      end

      # Writes the progress, renews the TTL, and returns the "cancelled" field (nil unless cancelled),
      # in one MULTI as Sidekiq does.
      def save(jid, progress)
        name = key(jid)
        fields = {"ex" => progress.executions, "c" => JSON.generate(progress.cursor), "rt" => progress.runtime}
        replies = JobQueue.redis do |conn|
          conn.multi do |tx|
            tx.hset(name, fields)
            tx.expire(name, TTL)
            tx.hget(name, "cancelled")
          end
        end
        replies.last
      end

      # Marks the job cancelled (the first time only) and returns the epoch second it was.
      def cancel!(jid)
        name = key(jid)
        replies = JobQueue.redis do |conn|
          conn.pipelined do |pipe|
            pipe.hsetnx(name, "cancelled", Time.now.to_i)
            pipe.hget(name, "cancelled")
            pipe.expire(name, TTL)
          end
        end
        replies[1].to_i
      end

      # The "cancelled" field: nil, or the epoch second as a String.
      def cancelled(jid)
        JobQueue.redis { |conn| conn.hget(key(jid), "cancelled") }
      end

      def delete(jid)
        JobQueue.redis { |conn| conn.unlink(key(jid)) }
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
