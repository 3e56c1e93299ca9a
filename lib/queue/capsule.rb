# frozen_string_literal: true

module JobQueue
  # A capsule (Sidekiq 7's `config.capsule("name") { |c| ... }`): a group of processor threads of
  # its own, with its own queues and concurrency, in the same process as the default capsule (the
  # configuration's own `queues` and `concurrency`). A thread of a capsule only runs jobs of that
  # capsule's queues, so a capsule of concurrency 1 runs one job at a time whatever the others run.
  #
  #   JobQueue.configure do |config|
  #     config.capsule("single") do |c|
  #       c.concurrency = 1
  #       c.queues = %w[single]      # or %w[a,3 b,1]: weights as for config.queues
  #     end
  #   end
  class Capsule
    DEFAULT = "default"

    attr_reader :name, :concurrency

    def initialize(name, config)
      @name = name
      @config = config
      @concurrency = config.concurrency
      self.queues = ["default"]
    end

    def concurrency=(n)
      raise ArgumentError, "capsule #{@name.inspect}: concurrency must be a positive Integer, got #{n.inspect}" unless n.is_a?(Integer) && n.positive?

      @concurrency = n
    end

    # Queues as for Configuration#queues= ("name" or "name,weight"; without weights, strict order).
    def queues=(list)
      parsed = @config.parse_queues(list)
      @strict = parsed.none? { |_, weight| weight&.positive? }
      @given = parsed.to_h { |name, weight| [name, weight.to_i] }
      @queues = parsed.map { |name, weight| [name, [weight.to_i, 1].max] }
    rescue ArgumentError => e
      raise ArgumentError, "capsule #{@name.inspect}: #{e.message}"
    end

    # [[name, weight], ...] in priority order (weights 1 when strict).
    def queue_weights = @queues

    # Queue names, as Sidekiq 7's Capsule#queues (each once).
    def queues = @queues.map(&:first)

    def strict_order? = @strict

    # Sidekiq 7's `weights`: queue => the weight given (0 where none was, as Sidekiq records it;
    # such a queue is drawn as weight 1), 0 for every queue in strict order.
    def weights = @given

    # Sidekiq 7's `mode`: :strict, :random (every weight 1) or :weighted.
    def mode
      if @strict then :strict
      elsif @given.values.all? { |w| w == 1 } then :random
      else :weighted
      end
    end
  end

  # `config.capsule("default")`: the configuration's own queues and concurrency, under Capsule's names.
  class DefaultCapsule
    def initialize(config)
      @config = config
    end

    def name = Capsule::DEFAULT

    def concurrency = @config.concurrency

    def concurrency=(n)
      @config.concurrency = n
    end

    def queues = @config.queue_names

    def queues=(list)
      @config.queues = list
    end
  end
end
