# frozen_string_literal: true

module JobQueue
  module RailsIntegration
    # config/queue.yml for clients and servers alike: its `redis:` settings (Configuration#redis=) and
    # `routing_rules:` (Configuration#routing_rules=), top level or in the section of the running
    # environment, ERB first, as the CLI reads the file. The server's own keys (concurrency, queues,
    # timeout, ...) are the CLI's, where flags win.
    module ConfigFile
      module_function

      def apply(path, environment, config = JobQueue.config)
        return unless File.exist?(path)

        data = settings(path, environment.to_s)
        redis = redis_from(path, data)
        config.redis = redis if redis
        apply_shards(path, data, config) if data.key?("redis_shards")
        apply_routing_rules(path, data, config) if data.key?("routing_rules")
      end

      def apply_routing_rules(path, data, config)
        config.routing_rules = data["routing_rules"]
      rescue Routing::Error => e
        raise e.class, "#{path}: #{e.message}"
      end

      def redis_settings(path, environment)
        redis_from(path, settings(path, environment))
      end

      # The file's top-level keys with the environment's section over them, keys without a leading ":".
      def settings(path, environment)
        data = read(path)
        raise ArgumentError, "#{path} must hold a mapping" unless data.is_a?(Hash)

        data = plain_keys(data)
        section = data[environment].is_a?(Hash) ? plain_keys(data[environment]) : {}
        data.merge(section)
      end

      def redis_from(path, data)
        redis = data["redis"] or return nil
        raise ArgumentError, "#{path}: redis: must be a mapping (url:, password:, ...), got #{redis.inspect}" unless redis.is_a?(Hash)

        plain_keys(redis).transform_keys(&:to_sym)
      end

      def apply_shards(path, data, config)
        config.redis_shards = shards_from(path, data)
      rescue ArgumentError => e
        raise if e.message.start_with?(path)

        raise ArgumentError, "#{path}: #{e.message}"
      end

      # `redis_shards:` (shard name => redis options, as `redis:`), for Configuration#redis_shards=.
      def shards_from(path, data)
        shards = data["redis_shards"]
        raise ArgumentError, "#{path}: redis_shards: must be a mapping of shard name => redis options, got #{shards.inspect}" unless shards.is_a?(Hash)

        shards.to_h do |name, options|
          raise ArgumentError, "#{path}: redis_shards: #{name}: must be a mapping (url:, sentinels:, ...), got #{options.inspect}" unless options.is_a?(Hash)

          [name.to_s.delete_prefix(":"), plain_keys(options).transform_keys(&:to_sym)]
        end
      end

      # The file's ERB evaluated, then its YAML parsed. A mistake in either is an ArgumentError naming
      # the file (and the line), which exe/queue prints before it exits 1, not a backtrace.
      # YAML and ERB are required here, when a file is read: a server without one never loads them
      # (~1.5 MB of its memory; ARCHITECTURE.md, "Memory").
      def read(path)
        require "yaml"
        require "erb"
        YAML.safe_load(evaluate(path), permitted_classes: [Symbol], aliases: true, filename: path) || {}
      rescue Psych::Exception => e
        raise ArgumentError, "config file #{path} is not valid YAML: #{e.message.delete_prefix("(#{path}): ")}"
      end

      def evaluate(path)
        erb = ERB.new(File.read(path))
        erb.filename = path
        erb.result
      rescue StandardError, ScriptError => e
        line = e.backtrace_locations&.find { |l| l.path == path }&.lineno
        raise ArgumentError, "config file #{path}#{":#{line}" if line}: its ERB raised #{e.class}: #{e.message}"
      end

      def plain_keys(hash)
        hash.transform_keys { |k| k.to_s.delete_prefix(":") }
      end
    end
  end
end
