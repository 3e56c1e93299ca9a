# frozen_string_literal: true

require_relative "launcher"

module JobQueue
  # One server process serving several shards (`queue --shard main,jobs_b`; ARCHITECTURE.md,
  # "Shards"): a Launcher per shard, each with its own engine server, identity, heartbeat,
  # `concurrency` processor threads, scheduler and recovery on its shard, so each shard's keyspace
  # shows a complete process as Sidekiq's would. The group answers the CLI as one Launcher does:
  # signals go to every shard's launcher, the lifecycle events fire once (the first launcher's), and
  # the launchers stop together within one timeout.
  class LauncherGroup
    attr_reader :launchers

    def initialize(config, shards)
      @config = config
      @launchers = shards.each_with_index.map { |shard, i| Launcher.new(config, shard: shard, events: i.zero?) }
    end

    def run
      @launchers.each(&:run)
      self
    end

    def identity
      @launchers.map(&:identity).join(",")
    end

    def started?
      @launchers.any?(&:started?)
    end

    def quiet?
      @launchers.first.quiet?
    end

    def quiet
      @launchers.each(&:quiet)
    end

    # Stops every shard's launcher at once (each waits out the same timeout for its threads); the
    # first, which fires the shutdown event, is stopped on the calling thread. Returns the jobs put back.
    def stop
      started = @launchers.select(&:started?)
      others = started.drop(1).map { |launcher| Thread.new { launcher.stop } }
      first = started.first&.stop.to_i
      first + others.sum { |t| t.value.to_i }
    end

    # "queue 0.1.0 tag [3 of 20 busy]": the busy threads of every shard's launcher.
    def update_title
      return unless started?

      tag = @config.tag.to_s.empty? ? "" : " #{@config.tag}"
      busy = @launchers.sum(&:busy_count)
      title = "queue #{VERSION}#{tag} [#{busy} of #{@config.total_concurrency * @launchers.size} busy]"
      title += " stopping" if quiet?
      ::Process.setproctitle(title)
    end

    def remote_signals
      @launchers.flat_map(&:remote_signals).uniq
    end
  end
end
