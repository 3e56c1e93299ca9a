# frozen_string_literal: true

require_relative "../queue"

module JobQueue
  # Prometheus metrics, as a Rack app answering `GET` (and `HEAD`) with the exposition text:
  #
  #   # config/routes.rb
  #   require "queue/metrics"
  #   mount JobQueue::Metrics => "/metrics"
  #
  #   # config.ru
  #   require "queue/metrics"
  #   run JobQueue::Metrics
  #
  # The figures are cluster-wide (every server process adds its counts to Redis with each liveness
  # beat), so any process that can reach Redis may serve them. One scrape costs Redis a few pipelined
  # round trips, O(queues + processes + ordered workers), whatever the number of jobs. The text is
  # encoded by the engine with the `prometheus-client` crate, in the OpenMetrics text format; see
  # README, "Metrics".
  module Metrics
    CONTENT_TYPE = Native::METRICS_CONTENT_TYPE
    METHODS = %w[GET HEAD].freeze

    module_function

    def call(env)
      method = env["REQUEST_METHOD"]
      return plain(405, "only GET and HEAD are answered\n", "allow" => METHODS.join(", ")) unless METHODS.include?(method)

      body = text
      [200, {"content-type" => CONTENT_TYPE, "cache-control" => "no-store"}, method == "HEAD" ? [] : [body]]
    rescue JobQueue::ConnectionError, JobQueue::RedisError => e
      plain(503, "queue metrics: #{e.message}\n")
    end

    # The exposition text. `ordered` are the ordered workers reported by name (every loaded one by
    # default).
    def text(ordered: Ordered.workers)
      rows = ordered.map { |w| [w.name || w.queue_name, w.queue_name, w.shards_count] }
      JobQueue.engine.metrics_text(rows)
    end

    def plain(status, message, headers = {})
      [status, {"content-type" => "text/plain; charset=utf-8"}.merge(headers), [message]]
    end
  end
end
