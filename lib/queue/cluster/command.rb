# frozen_string_literal: true

module JobQueue
  module Cluster
    # `queue cluster [options] GROUP...`: the server's flags (each passed to every child), plus
    # `-n N` processes per group, `--max-memory SIZE` and `--memory-check-interval SECONDS`, and
    # `--dryrun`. Boots the app once in the parent, then runs the Supervisor.
    class Command
      BANNER = "Usage: queue cluster [options] GROUP...\n" \
               "  GROUP: one process's queues, comma-separated (mailers,default); a namespace stands\n" \
               "  for its queues; '*' for every declared queue.\n\n" \
               "Server options (passed to every process; not -q: the groups are the queues):"

      def initialize(cli, out: $stdout)
        @cli = cli
        @out = out
      end

      def run(argv)
        $stdout.sync = true
        flags = nil
        options = @cli.parse(argv) do |parser, given|
          flags = given
          cluster_options(parser, given)
        end
        return 0 if options[:exit]

        @shard = options[:shard]
        raise ArgumentError, "queue cluster: -q does not apply; each GROUP argument lists one process's queues" unless flags[:queues].to_a.empty?

        notify = Notify.from_env unless options[:dryrun]
        begin
          status = @cli.prepare(options)
          return status if status

          children = children(options)
          return dryrun(children) if options[:dryrun]

          supervise(children, options, notify)
        ensure
          notify&.close
        end
      end

      private

      def cluster_options(parser, flags)
        parser.banner = BANNER
        parser.separator ""
        parser.separator "Cluster options:"
        parser.on("-n", "--processes N", Integer, "processes per group, each with its own threads (a swarm; default 1)") do |v|
          raise OptionParser::InvalidArgument, "#{v} (must be at least 1)" unless v >= 1

          flags[:processes] = v
        end
        parser.on("--max-memory SIZE", "replace a process whose RSS passes SIZE (K, M or G: 2G), after its running jobs finish") do |v|
          flags[:max_memory] = Memory.parse_size(v)
        end
        parser.on("--memory-check-interval SECONDS", Float, "how often each process's RSS is read (default 3)") do |v|
          raise OptionParser::InvalidArgument, "#{v} (must be more than 0)" unless v.positive?

          flags[:memory_interval] = v
        end
        parser.on("--dryrun", "print each process's queues and exit") { flags[:dryrun] = true }
      end

      # One Child per process: each group, `-n` times, indexed in order.
      def children(options)
        groups = Groups.parse(options[:args], ApplicationWorker.queues)
        count = options[:processes] || 1
        groups.flat_map { |queues| Array.new(count) { queues } }.each_with_index.map { |queues, index| Child.new(index, queues) }
      end

      def dryrun(children)
        children.each { |child| @out.puts "#{child.index}: #{child.queue_names.join(",")}" }
        0
      end

      def supervise(children, options, notify)
        config = JobQueue.config
        tag = config.tag.to_s
        JobQueue.logger.info("queue cluster #{VERSION}: #{children.size} processes of #{config.concurrency} threads" \
                             "#{options[:max_memory] ? ", each up to #{Memory.human(options[:max_memory])}" : ""}")
        parent = ::Process.pid
        supervisor = Supervisor.new(children, timeout: config.timeout, max_memory: options[:max_memory],
          memory_interval: options[:memory_interval] || 3.0, notify: notify) do |child|
          serve(child, tag, notify, parent)
        end
        supervisor.run
      end

      # In the forked process: this child's queues, tag and environment, then one server as `queue`
      # runs it.
      def serve(child, tag, notify, parent)
        ENV.update(notify.child_env(child.index, ::Process.pid)) if notify
        ENV["QUEUE_CLUSTER_INDEX"] = child.index.to_s
        Thread.current[:job_queue_tid] = nil # the log lines' tid is per process and thread (logging.rb)
        config = JobQueue.config
        config.forked!
        config.queues = child.queues
        config.tag = tag.empty? ? child.index.to_s : "#{tag}-#{child.index}"
        @cli.cluster_parent = parent # a child whose parent died stops, as on TERM
        @cli.launch(@cli.served_shards(@shard))
      end
    end
  end
end
