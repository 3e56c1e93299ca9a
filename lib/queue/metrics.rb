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
    # default). With several shards (config.redis_shards) every sample carries a `shard` label, each
    # family listed once with the samples of every shard; with one, the text has no such label.
    def text(ordered: Ordered.workers)
      rows = ordered.map { |w| [w.name || w.queue_name, w.queue_name, w.shards_count] }
      shards = JobQueue.config.shards
      return JobQueue.engine.metrics_text(rows) unless shards.many?

      merge(shards.names.to_h { |name| [name, JobQueue.config.shard_engine(name).metrics_text(rows)] })
    end

    # Several shards' exposition texts as one: each family's HELP/TYPE/UNIT lines once (the first
    # shard's), then its samples from every shard, each labelled shard="NAME"; one "# EOF" at the end.
    def merge(texts)
      families = {}
      texts.each do |shard, text|
        family = nil
        text.each_line(chomp: true) do |line|
          next if line.empty? || line == "# EOF"

          if line.start_with?("# ")
            name = line.split(" ", 4)[2]
            family = families[name] ||= {owner: shard, lines: []}
            family[:lines] << line if family[:owner] == shard
          else
            (family ||= families[""] ||= {owner: shard, lines: []})[:lines] << labelled(line, shard)
          end
        end
      end
      families.each_value.flat_map { |f| f[:lines] }.push("# EOF").join("\n") << "\n"
    end

    # A sample line with shard="NAME" as its first label.
    def labelled(line, shard)
      label = %(shard="#{shard}")
      brace = line.index("{")
      space = line.index(" ")
      return line.sub(" ", "{#{label}} ") if brace.nil? || (space && space < brace)

      line[brace + 1] == "}" ? line.insert(brace + 1, label) : line.insert(brace + 1, "#{label},")
    end

    def plain(status, message, headers = {})
      [status, {"content-type" => "text/plain; charset=utf-8"}.merge(headers), [message]]
    end
  end
end
