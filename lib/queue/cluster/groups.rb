# frozen_string_literal: true

module JobQueue
  module Cluster
    # The GROUP arguments of `queue cluster`, as GitLab's sidekiq-cluster reads them: each is one
    # process's queues, comma-separated ("mailers,default"); a name that is a namespace of declared
    # queues stands for itself and them, as with `-q` (declared_queues.rb); `*` stands for every
    # declared queue and "default". Each queue weighs 1 and is drawn in a random order per fetch, as sidekiq-cluster starts
    # each process with `-q name,1` per queue.
    module Groups
      module_function

      # [[queue, weight], ...] for each group, in order. Raises ArgumentError naming a bad group.
      def parse(args, declared)
        raise ArgumentError, "queue cluster needs at least one GROUP of queues (e.g. `queue cluster mailers,default '*'`)" if args.empty?

        args.map { |group| parse_group(group, declared) }
      end

      def parse_group(group, declared)
        names = group.split(",").map(&:strip)
        raise ArgumentError, "queue cluster: group #{group.inspect} has an empty queue name" if names.empty? || names.any?(&:empty?)

        queues = names.flat_map { |name| name == "*" ? every(declared) : [name, *members(name, declared)] }.uniq
        queues.map { |name| [name, 1] }
      end

      # The declared queues in namespace `name` ("cronjob" => "cronjob:import", ...), as -q expands it.
      def members(name, declared)
        declared.keys.select { |queue| queue.start_with?("#{name}:") }
      end

      # Every declared queue (ApplicationWorker queues), and "default".
      def every(declared)
        (declared.keys + ["default"]).uniq
      end
    end
  end
end
