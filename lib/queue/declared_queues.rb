# frozen_string_literal: true

require_relative "application_worker"

module JobQueue
  # The server's queues from the declared workers, applied once the app has booted:
  #
  # - With no queues set (no -q, no `:queues:` in the config file, none set by the app) and at least one
  #   ApplicationWorker loaded, the server listens to every loaded ApplicationWorker's queue, weighted
  #   by its `weight`, plus "default" (where plain JobQueue::Workers go). Always in weighted random
  #   order, even when every weight is 1, as GitLab's generated sidekiq_queues.yml is: no queue of an
  #   arbitrary load order starves the others.
  # - A queue given that is a namespace of declared queues (`-q cronjob`, with `cronjob:*` workers
  #   loaded) stands for itself and every declared queue in it, each with the weight given to it.
  module DeclaredQueues
    module_function

    def apply(config)
      declared = ApplicationWorker.queues
      if !config.queues_set?
        config.queues = defaults(declared) unless declared.empty?
      else
        expanded = expand(config, declared.keys)
        config.queues = expanded if expanded
      end
    end

    # [[name, weight], ...] of the declared queues, and "default".
    def defaults(declared)
      queues = declared.map { |name, weight| [name, weight] }
      queues << ["default", 1] unless declared.key?("default")
      queues
    end

    # The configured queues with namespaces expanded, in the same form (names only when strict), or nil
    # when no name is a namespace.
    def expand(config, declared_names)
      changed = false
      expanded = config.queues.flat_map do |name, weight|
        members = declared_names.select { |queue| queue.start_with?("#{name}:") }
        changed ||= !members.empty?
        [name, *members].map { |queue| config.strict_order? ? queue : [queue, weight] }
      end
      return nil unless changed

      expanded.uniq { |entry| entry.is_a?(Array) ? entry.first : entry }
    end
  end
end
