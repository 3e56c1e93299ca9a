# frozen_string_literal: true

require_relative "processor"
require_relative "ordered/server"

module JobQueue
  # Runs one server process: the engine's background work (heartbeat, scheduler, recovery) and
  # `concurrency` processor threads. The CLI (cli.rb) runs one and turns signals into its calls;
  # JobQueue::Embedded (embedded.rb) runs one inside another program (Puma), `embedded: true`.
  #
  # Stopping is ordered so that every job either finishes or goes back to its queue: quiet the
  # engine (no more work is handed out), let the threads finish within the timeout, then have the
  # engine put back whatever is still held, and only then interrupt the threads that outlived it.
  class Launcher
    attr_reader :identity, :config, :ordered, :shard

    # `shard`: the Redis shard this launcher serves (config.redis_shards; "main" by default).
    # `events: false` leaves the lifecycle events to another launcher of the same process
    # (LauncherGroup, when a process serves several shards).
    def initialize(config = JobQueue.config, embedded: false, shard: Shards::MAIN, events: true)
      @config = config
      @embedded = embedded
      @shard = config.shards.check!(shard)
      @events = events
      @identity = "#{hostname}:#{::Process.pid}:#{SecureRandom.hex(6)}"
      @quiet = false
      @processors = []
      @lock = Mutex.new
    end

    def run
      if @events
        @config.fire_event(:startup, reraise: true) # lifecycle hooks (lifecycle.rb), as Sidekiq's CLI
        @config.engine_job_lines = Logging.start_server_lines(@config) # per-job lines (logging.rb)
      end
      @server = engine.start_server(@identity, @config.queues, server_options)
      if @events
        @config.fire_event(:heartbeat) # the engine registered the process and wrote its first beat
        @config.on_server_init&.call
      end
      @ordered = Ordered::Server.start(@config, @identity, engine: engine) # shard leases of ordered workers (ordered/server.rb)
      @limits = Limits::Refresher.start(@config, engine) # concurrency limits published, lambdas re-read (limits.rb)
      @processors = Array.new(@config.concurrency) { |i| Processor.new(self, @server, @config, i).start }
      @config.capsules.each_value.with_index(1) do |cap, number|
        @processors.concat(Array.new(cap.concurrency) { |i| Processor.new(self, @server, @config, i, capsule: number, capsule_name: cap.name).start })
      end
      on = @shard == Shards::MAIN && !@config.shards.many? ? "" : " of shard #{@shard}"
      @config.logger.info("queue #{VERSION} started as #{@identity}: #{@config.concurrency} threads on #{queue_summary}#{capsule_summary}#{on}")
      @config.logger.info("ordered workers: #{@ordered.summary}") if @ordered
      self
    end

    def quiet?
      @quiet
    end

    # The engine of this launcher's shard (the settings as they are when the server starts).
    def engine
      @engine ||= @config.shard_engine(@shard)
    end

    # True when run inside another program (JobQueue.configure_embed).
    def embedded?
      @embedded
    end

    # True once the engine's server runs (registered in Redis): until then there is nothing to stop.
    def started?
      !@server.nil?
    end

    # Stop taking new jobs (TSTP); running ones finish.
    def quiet
      return if @quiet

      @quiet = true
      @server&.quiet
      @config.logger.info("quiet: no new jobs will be taken")
      @config.fire_event(:quiet, reverse: true) if @events
    end

    # Graceful stop. Returns the number of jobs put back on their queues. The engine tells systemd
    # (STOPPING=1) first, when run under it with Type=notify.
    def stop
      @server&.stopping
      quiet
      @config.fire_event(:shutdown, reverse: true) if @events
      deadline = monotonic + @config.timeout
      processors = @lock.synchronize { @processors.dup }
      processors.each { |p| p.thread.join([deadline - monotonic, 0].max) }
      stragglers = processors.map(&:thread).select(&:alive?)
      @limits&.stop
      requeued = @server ? @server.stop : 0
      stragglers.each { |t| t.raise(Shutdown, "shutdown timeout") }
      stragglers.each { |t| t.join(2) }
      stop_ordered(stragglers)
      @config.logger.info("stopped; #{requeued} unfinished job(s) back in their queues")
      Logging.flush if @events
      requeued
    end

    # The process title, as Sidekiq sets it for `ps` and `top`: "queue 0.1.0 app [3 of 10 busy]", with
    # " stopping" once quiet. The CLI's loop calls it every second. Not when embedded: the title is
    # the host program's (Sidekiq 7 leaves $0 alone when embedded too).
    def update_title
      return unless @server && !@embedded

      tag = @config.tag.to_s.empty? ? "" : " #{@config.tag}"
      title = "queue #{VERSION}#{tag} [#{@server.busy_count} of #{@config.total_concurrency} busy]"
      title += " stopping" if @quiet
      ::Process.setproctitle(title)
    end

    # Threads busy with a job (0 before the server runs).
    def busy_count
      @server ? @server.busy_count : 0
    end

    # Signals (TSTP, TERM, TTIN) a dashboard sent to this process.
    def remote_signals
      @server ? @server.take_signals : []
    end

    # A processor thread died of an error outside any job (a job's own errors never get here): log it
    # and start a new one in its place, as Sidekiq does. Its job, if any, is still in its working list.
    # @api private
    def processor_died(processor, error)
      @config.logger.error("#{processor.thread&.name} died: #{error.class}: #{error.message}")
      return if @quiet

      @lock.synchronize do
        index = @processors.index(processor)
        if index
          @processors[index] = Processor.new(self, @server, @config, processor.index, capsule: processor.capsule,
            capsule_name: processor.capsule_name).start
        end
      end
    end

    private

    # Releases the ordered shards, unless a thread may still run an ordered batch: then the leases lapse
    # (15 s) and the next owner recovers what it left in processing, so no id ever runs twice at once.
    def stop_ordered(stragglers)
      return unless @ordered
      return @config.logger.warn("ordered shards not released: a thread outlived the shutdown") if stragglers.any?(&:alive?)

      @ordered.stop
    rescue Error => e
      @config.report_error(e, context: "releasing ordered shards failed; they lapse in 15 s")
    end

    # What the engine's server takes besides identity and queues (ext/queue/src/ruby_api/start_server.rs
    # lists the keys; a key it does not know raises).
    def server_options
      {
        strict: @config.strict_order?, concurrency: @config.concurrency, max_batch: @config.max_batch,
        info_json: info_json, scheduler: true,
        supervised: !@embedded, # an embedded server leaves systemd's NOTIFY_SOCKET to the program it runs in
        gitlab_fetch_scan: @config.gitlab_fetcher_scan,
        sidekiq_metrics: @config.sidekiq_metrics || nil,
        capsules: @config.capsules.values.map { |cap| [cap.name, cap.queue_weights, cap.strict_order?, cap.concurrency] },
        malloc_arena_max: malloc_arena_max,
        malloc_trim_interval: @config.malloc_trim_interval&.to_f
      }
    end

    # The configuration's arena limit, unless the process was started with MALLOC_ARENA_MAX (glibc
    # read it then, and the user's setting wins).
    def malloc_arena_max
      @config.malloc_arena_max unless ENV.key?("MALLOC_ARENA_MAX")
    end

    # The process hash's `info`, as Sidekiq 8.0.10 writes it (ARCHITECTURE.md, "Liveness"): Sidekiq
    # 6.4's fields, 7.x's `version`, `weights` (one hash per capsule) and `embedded`, 8.0.9's
    # `capsules`: the default capsule (the configuration's queues and concurrency), then each of
    # `config.capsules`; `concurrency` is their total and `queues` every capsule's, each once, as
    # Sidekiq 7.3's Launcher#to_data. `version` names this gem, so a Sidekiq dashboard on a shared
    # Redis tells our processes from its own.
    def info_json
      weights = capsule_weights
      capsules = {Capsule::DEFAULT => {"concurrency" => @config.concurrency, "mode" => capsule_mode(weights), "weights" => weights}}
      @config.capsules.each_value do |cap|
        capsules[cap.name] = {"concurrency" => cap.concurrency, "mode" => cap.mode.to_s, "weights" => cap.weights}
      end
      info = {
        "hostname" => hostname,
        "started_at" => Time.now.to_f,
        "pid" => ::Process.pid,
        "tag" => @config.tag.to_s,
        "concurrency" => @config.total_concurrency,
        "capsules" => capsules,
        "queues" => (@config.queue_names + @config.capsules.values.flat_map(&:queues)).uniq,
        "weights" => capsules.values.map { |c| c["weights"] },
        "labels" => Array(@config.labels),
        "identity" => @identity,
        "version" => "queue #{VERSION}",
        "embedded" => @embedded
      }
      info["shard"] = @shard if @config.shards.many? # only Sidekiq's own fields on a single Redis
      JSON.generate(info)
    end

    # Queue name => weight as Sidekiq 7/8 record it: 0 for every queue when the order is strict, else
    # the weight each queue is drawn with.
    def capsule_weights
      @config.queues.to_h { |name, weight| [name, @config.strict_order? ? 0 : weight] }
    end

    # Sidekiq's name for the fetch order: "strict", "random" (all weights 1) or "weighted".
    def capsule_mode(weights)
      if weights.values.all?(&:zero?) then "strict"
      elsif weights.values.all? { |w| w == 1 } then "random"
      else "weighted"
      end
    end

    def capsule_summary
      @config.capsules.each_value.map { |cap| "; capsule #{cap.name}: #{cap.concurrency} thread#{"s" unless cap.concurrency == 1} on #{cap.queues.join(" ")} (#{cap.mode})" }.join
    end

    def queue_summary
      return "#{@config.queue_names.join(" ")} (strict order)" if @config.strict_order?

      "#{@config.queues.map { |name, weight| "#{name},#{weight}" }.join(" ")} (weighted random order)"
    end

    def hostname
      ENV["DYNO"] || Socket.gethostname
    end

    def monotonic
      ::Process.clock_gettime(::Process::CLOCK_MONOTONIC)
    end
  end
end
