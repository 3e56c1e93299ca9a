# frozen_string_literal: true

module JobQueue
  # The live server processes (Sidekiq's `ProcessSet`), ours and Sidekiq's alike, by identity.
  class ProcessSet
    include Enumerable

    # Prunes entries whose process hash has expired first, unless `clean_plz` is false.
    def initialize(clean_plz = true)
      cleanup if clean_plz
    end

    # Removes the entries of processes that stopped beating. Returns how many.
    def cleanup = API.shards.sum { |shard| API.engine(shard).api_processes_cleanup.to_i }

    def each
      return to_enum(:each) unless block_given?

      API.shards.each do |shard|
        API.engine(shard).api_processes.each do |_identity, info, busy, beat, quiet, rss, rtt|
          next if info.nil?

          yield Process.new(JSON.parse(info).merge("busy" => busy, "beat" => beat, "quiet" => quiet, "rss" => rss, "rtt_us" => rtt), shard: shard)
        end
      end
    end

    # Entries in the set (as Redis counts them, expired ones included until `cleanup`).
    def size = API.shards.sum { |shard| API.engine(shard).api_processes.size }

    def total_concurrency = sum { |p| p["concurrency"].to_i }

    def total_rss_in_kb = sum { |p| p["rss"].to_i }
    alias_method :total_rss, :total_rss_in_kb

    # Sidekiq Enterprise's leader; there is none here.
    def leader = ""
  end

  # One server process: its heartbeat fields (`hostname`, `pid`, `tag`, `concurrency`, `queues`,
  # `busy`, `beat`, `quiet`, `rss`, …) and the dashboard's buttons, sent as signals through Redis.
  class Process
    # The Redis shard whose process set holds this process ("main" unless config.redis_shards).
    attr_reader :shard

    def initialize(hash, shard: Shards::MAIN)
      @attribs = hash
      @shard = shard
    end

    def [](key) = @attribs[key]

    def to_h = @attribs.dup

    def tag = self["tag"]

    def labels = Array(self["labels"])

    def identity = self["identity"]

    def queues = self["queues"]

    # Stop taking jobs (TSTP), on the process's next beat.
    def quiet! = signal("TSTP")

    # Shut down (TERM), on the process's next beat.
    def stop! = signal("TERM")

    # Log every thread's backtrace (TTIN).
    def dump_threads = signal("TTIN")

    def stopping? = self["quiet"] == "true"

    private

    def signal(name) = API.engine(shard).api_signal(identity, name)
  end
end
