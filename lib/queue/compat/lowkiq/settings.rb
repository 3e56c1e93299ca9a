# frozen_string_literal: true

# `Lowkiq.*` settings, each mapped onto JobQueue.config (README, "Moving from Lowkiq").
module Lowkiq
  MISSING = {
    Web: "Lowkiq's dashboard is not available yet; JobQueue::Ordered.stats is its /api/v1/stats, and " \
      "JobQueue::Ordered.morgue/requeue/delete (or `bundle exec queue ordered ...`) its buttons",
    Server: "run `bundle exec queue -r ./path_to_app` (it serves every loaded Lowkiq::Worker)",
    Splitters: "custom splitters are not supported; Lowkiq.build_default_splitter, build_by_node_splitter(n, i), " \
      "or queue's own balanced leases (the default)",
    Schedulers: "custom schedulers are not supported; Lowkiq.build_lag_scheduler or build_seq_scheduler",
    Queue: "use Worker.perform_async and JobQueue::Ordered (stats, morgue, requeue, ...)"
  }.freeze
  NO_OP_INIT = -> {}
  NO_OP_LAST_WORDS = ->(_error) {}

  class << self
    # @api private: tells this shim's Lowkiq from the gem's.
    def queue_compat? = true

    # Callables `(worker, batch, &block)` around every `perform`: JobQueue's ordered server
    # middlewares (the same Array, so `<<` works).
    def server_middlewares = config.ordered_server_middlewares

    def server_middlewares=(list)
      config.ordered_server_middlewares.replace(Array(list))
    end

    # Callables `(worker, batch, &block)` around every `perform_async`, first outermost, as Lowkiq's.
    def client_middlewares
      @client_middlewares ||= []
    end

    def client_middlewares=(list)
      @client_middlewares = Array(list)
    end

    # @api private: runs `push` inside the client middlewares.
    def around_client(worker, batch, &push)
      chain = client_middlewares
      step = ->(i) { (i == chain.size) ? push.call : chain[i].call(worker, batch) { step.call(i + 1) } }
      step.call(0)
    end

    def on_server_init = config.on_server_init || NO_OP_INIT

    def on_server_init=(callable)
      config.on_server_init = callable
    end

    def last_words = config.last_words || NO_OP_LAST_WORDS

    def last_words=(callable)
      config.last_words = callable
    end

    # Seconds an idle thread waits before it looks for work again (queue's default is 0.2).
    def poll_interval = config.ordered_poll_interval

    def poll_interval=(seconds)
      config.ordered_poll_interval = seconds
    end

    # The server's thread count: queue's `concurrency` (its threads serve plain and ordered jobs).
    def threads_per_node = config.concurrency

    def threads_per_node=(count)
      config.concurrency = count
    end

    attr_reader :redis

    # `Lowkiq.redis = -> { Redis.new(url: ...) }`: the block is called once, here, and the client it
    # builds gives its connection settings (url or host/port/path, db, password) to `config.redis`.
    def redis=(builder)
      raise ArgumentError, "Lowkiq.redis = takes a callable that builds a Redis, got #{builder.inspect}" unless builder.respond_to?(:call)

      client = builder.call
      options = client.respond_to?(:_client) && client._client.respond_to?(:options) && client._client.options
      unless options
        raise ArgumentError, "Lowkiq.redis: #{client.class} is not a redis-rb client; set the connection with " \
          "JobQueue.configure { |c| c.redis = {url: ...} } (REDIS_URL by default, as Lowkiq's)"
      end

      config.redis = redis_settings(options)
      client.close
      @redis = builder
    end

    # Accepted, not used: queue's engine keeps its own connections (JobQueue.redis_pool is sized by
    # `config.redis = {size:, pool_timeout:}`).
    attr_accessor :client_pool_size, :pool_timeout

    # Lowkiq's pools, for an app's own Redis calls: JobQueue.redis_pool (`with { |conn| ... }`).
    def server_redis_pool = JobQueue.redis_pool

    def client_redis_pool = JobQueue.redis_pool

    def build_scheduler
      @build_scheduler ||= -> { build_lag_scheduler }
    end

    # Applied in the server (where Lowkiq calls it); a client keeps the callable only.
    def build_scheduler=(callable)
      @build_scheduler = callable
      apply_scheduler(callable.call) if JobQueue.server?
    end

    def build_lag_scheduler = :lag

    def build_seq_scheduler = :seq

    def build_splitter
      @build_splitter ||= -> { build_default_splitter }
    end

    def build_splitter=(callable)
      @build_splitter = callable
      apply_splitter(callable.call) if JobQueue.server?
    end

    def build_default_splitter = :default

    def build_by_node_splitter(number_of_nodes, node_number)
      [:by_node, Integer(number_of_nodes), Integer(node_number)]
    end

    def dump_payload
      @dump_payload ||= ::Marshal.method(:dump)
    end

    def load_payload
      @load_payload ||= ::Marshal.method(:load)
    end

    attr_writer :dump_payload, :load_payload

    # @api private: the codec of Lowkiq::Worker modules (payload_codec.rb).
    def payload_codec
      return JobQueue::Ordered::PayloadFormat::Marshal if dump_payload == ::Marshal.method(:dump) && load_payload == ::Marshal.method(:load)

      JobQueue::Compat::LowkiqPayloadCodec.new(dump_payload, load_payload)
    end

    # How a failed batch's error is stored (JobQueue.config.ordered_error_format; queue's default is
    # "Class: message", where Lowkiq's is the message alone).
    def format_error = JobQueue.config.ordered_error_format

    def format_error=(callable)
      JobQueue.config.ordered_error_format = callable
    end

    def dump_error=(_callable)
      raise JobQueue::Compat.unsupported("Lowkiq.dump_error =", "queue stores the error text as is")
    end

    def load_error=(_callable)
      raise JobQueue::Compat.unsupported("Lowkiq.load_error =", "queue stores the error text as is")
    end

    # The ordered workers `bundle exec queue` serves: every loaded one (Lowkiq serves only the ones
    # listed here). Setting it checks the list.
    def workers
      @workers || JobQueue::Ordered.workers
    end

    def workers=(list)
      list = Array(list)
      bad = list.reject { |w| w.is_a?(Module) && w.is_a?(JobQueue::OrderedWorker) }
      raise ArgumentError, "Lowkiq.workers: #{bad.map(&:inspect).join(", ")} did not `extend Lowkiq::Worker`" if bad.any?

      @workers = list
    end

    def const_missing(name)
      instead = MISSING[name]
      return super unless instead

      raise JobQueue::Compat.unsupported("Lowkiq::#{name}", instead)
    end

    private

    def config = JobQueue.config

    def redis_settings(options)
      return {url: options[:url], password: options[:password]}.compact if options[:url]

      {host: options[:host], port: options[:port], path: options[:path], db: options[:db], password: options[:password]}.compact
    end

    def apply_scheduler(name)
      return config.ordered_scheduler = name if %i[lag seq].include?(name)

      raise ArgumentError, "Lowkiq.build_scheduler must return Lowkiq.build_lag_scheduler or build_seq_scheduler " \
        "(custom schedulers are not supported), got #{name.inspect}"
    end

    # queue's :by_node splitter reads QUEUE_NUMBER_OF_NODES and QUEUE_NODE_NUMBER; they are set from
    # Lowkiq's arguments here (in the server only).
    def apply_splitter(choice)
      case choice
      in :default then config.ordered_splitter = :default
      in [:by_node, Integer => nodes, Integer => node]
        ENV["QUEUE_NUMBER_OF_NODES"] = nodes.to_s
        ENV["QUEUE_NODE_NUMBER"] = node.to_s
        config.ordered_splitter = :by_node
        config.ordered_splitter_spec # checks node < nodes here, where the app set it
      else
        raise ArgumentError, "Lowkiq.build_splitter must return Lowkiq.build_default_splitter or " \
          "build_by_node_splitter(number_of_nodes, node_number) (custom splitters are not supported), got #{choice.inspect}"
      end
    end
  end
end
