# frozen_string_literal: true

require_relative "job_retry"
require_relative "job_run"
require_relative "iterable"
require_relative "batch/runner"
require_relative "malloc_gc"
require_relative "thread_policy"

module JobQueue
  # One processor thread: takes a job from its fetcher, runs the server middleware and `perform`,
  # and reports the outcome. The engine writes the acknowledgement the moment a job finishes (without
  # waiting for Redis), files failures under Sidekiq's retry rules, and batches fetches and stats.
  class Processor
    include Batch::Runner
    # Longest a thread waits for work before it checks whether the process is stopping.
    WAIT = 1.0
    # Most jobs one `Fetcher#run` call runs before this loop looks at the process again (it also
    # returns whenever its buffer is empty or a job needs #process).
    RUN_LIMIT = 1000
    # Classes a job may name that run as another class when they are not defined here: Sidekiq 8's
    # ActiveJob adapter pushes its own wrapper, which runs as the wrapper of Rails' Sidekiq adapter
    # (ours without the sidekiq gem, rails_integration/job_wrapper.rb).
    CLASS_ALIASES = {"Sidekiq::ActiveJob::Wrapper" => "ActiveJob::QueueAdapters::SidekiqAdapter::JobWrapper"}.freeze

    # A job class and what the processor asks of it for every job, asked once: whether its workers
    # take a `jid`, the processor (`_context`) and a `bid`, and whether it has the limits DSL (whether
    # it has limits is asked per job: a class may declare them after its first job ran).
    ClassInfo = Struct.new(:klass, :jid, :context, :limits, :bid, :plain_new) do
      def self.of(klass)
        new(klass, setter(klass, :jid=), setter(klass, :_context=), klass.respond_to?(:queue_limits), setter(klass, :bid=),
          plain_new?(klass))
      end

      # Whether `klass.new` only allocates: Class's own `new` and BasicObject's empty `initialize`.
      # The engine then allocates the worker without the two method calls.
      def self.plain_new?(klass)
        klass.is_a?(Class) && klass.method(:new).owner == Class && klass.instance_method(:initialize).owner == BasicObject
      end

      # How a worker of `klass` takes `name`: false (it does not), :ivar (Worker's own accessor,
      # whose instance variable the engine may set without the call), or true (a call).
      def self.setter(klass, name)
        return false unless klass.is_a?(Module) && klass.public_method_defined?(name)

        klass.instance_method(name).owner == Worker ? :ivar : true
      end
    end

    attr_reader :thread, :index, :capsule, :capsule_name

    # `capsule`: the engine's index of this thread's capsule (0: the default one; JobQueue::Capsule).
    def initialize(launcher, server, config, index, capsule: 0, capsule_name: Capsule::DEFAULT)
      @launcher = launcher
      @server = server
      @config = config
      @index = index
      @capsule = capsule
      @capsule_name = capsule_name
      @retry = JobRetry.new(config, launcher.engine)
      @classes = {}
      @native_classes = {}
      @malloc_gc = MallocGc.for(config.gc_malloc_growth) # malloc_gc.rb
    end

    def start
      @thread = Thread.new { run }
      @thread.name = @capsule.zero? ? "queue-processor-#{@index}" : "queue-#{@capsule_name}-#{@index}"
      self
    end

    def run
      ThreadPolicy.apply(@config.job_thread_policy, @config.logger)
      @fetcher = engine_call { @capsule.zero? ? @server.fetcher(tid) : @server.fetcher_in(@capsule, tid) } until @fetcher || @launcher.quiet?
      # Ordered workers (lib/queue/ordered/thread_work.rb) run on the default capsule's threads.
      @ordered = @launcher.ordered&.thread_work(@index) if @capsule.zero?
      until @launcher.quiet?
        ran = @ordered && engine_call { @ordered.step }
        # The engine runs the jobs that ask nothing of #process itself (ext/queue/src/ruby_api/fetcher/run.rs).
        work = engine_call { @fetcher.run(wait(ran), @ordered ? 1 : RUN_LIMIT, native_classes, self) }
        take(work) if work.is_a?(Array)
      end
      engine_call { @ordered&.finish }
    rescue Shutdown
      # The shutdown timeout ran out; the engine already put this job back on its queue.
    rescue Exception => e # rubocop:disable Lint/RescueException
      @config.report_error(e, context: "processor thread died")
      abandon_ordered
      @launcher.processor_died(self, e)
    ensure
      @fetcher&.close
    end

    # Whether the server is stopping (quiet, or TERM): a job's `interrupted?`.
    def stopping?
      @launcher.quiet?
    end

    # Sidekiq's thread id: base-36 of the thread's object id xor the pid.
    def tid
      @tid ||= (Thread.current.object_id ^ ::Process.pid).to_s(36)
    end

    private

    # A thread dying outside a job puts back the ordered ids it holds (its plain job stays in its
    # working list), so they do not wait in processing until their shard changes owner.
    def abandon_ordered
      engine_call { @ordered&.abandon }
    rescue => e
      @config.report_error(e, context: "putting back the ordered batch of a dead processor thread failed")
    end

    # How long a plain fetch may wait: not at all right after an ordered batch (there may be more),
    # briefly while ordered workers may have work (an ordered push does not wake a parked thread).
    def wait(ordered_ran)
      return WAIT unless @ordered
      return 0 if ordered_ran

      @config.ordered_poll_interval
    end

    # Runs an engine call; when Redis is unreachable, reports it, backs off, and returns nil so the
    # loop tries again. Jobs are safe meanwhile: whatever the thread held is in its working list.
    def engine_call
      result = yield
      @backoff = nil
      result
    rescue ConnectionError, RedisError => e
      @backoff = [(@backoff || 0.1) * 2, 5].min
      @config.report_error(e, context: "engine call failed; retrying in #{@backoff}s")
      sleep @backoff
      nil
    end

    # The processor's cache of #native_class answers when the engine may run jobs itself, nil when
    # every job must take #process: server middleware to run, or job log lines written in Ruby.
    # Forgotten whenever a class declares a limit (its subclasses have it too), so that its next
    # fetched jobs are held to it, and whenever worker options change (deduplication).
    def native_classes
      return unless @config.server_middleware_chain.empty? && !@config.job_log

      limits = Limits.generation
      options = Worker.options_generation
      unless @limits_seen == limits && @options_seen == options
        @native_classes.clear
        @limits_seen = limits
        @options_seen = options
      end
      @native_classes
    end

    # Whether the engine may run jobs of class `name` itself: `[klass, takes_jid, takes_context,
    # takes_bid, limits, dedup, plain_new]`, or false when they need #process (limits with a key or a lambda).
    # `limits` (nil for none) is what the engine checks against the process's leases; a job they do
    # not cover takes #process. `dedup` is how a job holding its idempotency key releases it (as
    # #deduplicated asks). Asked by the engine once per class and thread; an unknown class raises,
    # and its jobs fail in #process.
    def native_class(name)
      info = class_info(name)
      klass = info.klass
      spec = info.limits && klass.queue_limits
      leasable = spec && Limits.leasable(klass, spec)
      return @native_classes[name] = false if spec && !leasable

      @native_classes[name] = [klass, info.jid, info.context, info.bid, leasable, release_options(klass), info.plain_new].freeze
    end

    # What `Fetcher#run` handed back: a job for #process, or a job of its own that raised.
    def take(work)
      if work.first == :failed
        _, klass, job, raw, error = work
        failed(klass, job, raw, error)
      else
        process(*work)
      end
      @malloc_gc&.job_done
    end

    # Called by the engine every MallocGc::CHECK_EVERY jobs it ran itself.
    def malloc_check
      @malloc_gc&.check
    end

    # `key_released`: the engine already released the job's idempotency key, with its batch. `job`:
    # the job Hash when the engine built it from `raw`, else nil (parsed here).
    def process(queue, raw, key_released, job = nil)
      job = job ? valid(job, raw) : parse(raw)
      return unless job

      klass = nil
      begin
        info = class_info(job["class"])
        klass = info.klass
        worker = klass.new
        worker.jid = job["jid"] if info.jid
        worker._context = self if info.context
        deduplicated(klass, job) if !key_released && job["idempotency_key"] && !job.key?("duplicate-of")
        return @fetcher.expired if Expiry.expired?(job) # `expires_in` ran out before it could start
        return if info.limits && (limits = klass.queue_limits) && Limits.held_back?(@fetcher, klass, limits, job, @config)
        return run_in_batch(klass, worker, job, queue) if job["bid"] # batch/runner.rb

        perform_job(klass, worker, job, queue, Context.in_json?(raw))
      rescue Exception => e # rubocop:disable Lint/RescueException
        failed(klass, job, raw, e)
      end
    end

    # A job raised `error`: the server's shutdown goes on up; an iterable job interrupted by the
    # stop goes back to its queue; anything else is filed under the retry rules.
    def failed(klass, job, raw, error)
      raise error if error.is_a?(Shutdown)
      return requeue_interrupted(job) if error.is_a?(Iterable::Interrupted)

      engine_call { @retry.failed(@fetcher, klass, job, raw, error) }
    end

    # `context`: whether the job may carry a worker context ("meta.*" fields; false when its JSON
    # has none, which spares looking at each of its keys).
    def perform_job(klass, worker, job, queue, context = true)
      chain = @config.server_middleware_chain
      JobRun.around(@config, klass, job, queue, context) do # log context, worker context, JSON job logs (job_run.rb)
        next worker.perform(*job["args"]) if chain.empty?

        chain.invoke(worker, job, queue) { worker.perform(*job["args"]) }
      end
      @fetcher.done
    end

    # An iterable job stopped between two items because the server is stopping; its cursor is saved.
    # As Sidekiq 7.3's InterruptHandler, the job (as the middleware left it, same jid) is pushed back to
    # its queue through the client (middleware included), and the run counts as done, not failed. When
    # Redis refuses the push the job is not acknowledged: the engine puts it back at the end of the stop.
    def requeue_interrupted(job)
      Client.new(@config).push(job)
      @fetcher.done
    rescue ConnectionError, RedisError => e
      @config.report_error(e, context: "re-queueing an interrupted iterable job failed; it goes back to its queue when the server stops")
    end

    # A job pushed with deduplication that holds its key (a job marked `duplicate-of` never does):
    # the engine releases the key now (until_executing) or with the job's ack or failure
    # (until_executed), and hands over the newest `wal_locations` kept for it.
    def deduplicated(klass, job)
      executed, ttl, reschedule = release_options(klass)
      positions = @fetcher.dedup(job["idempotency_key"].to_s, job["jid"].to_s, executed, ttl, reschedule, job.key?("wal_locations"))
      job["wal_locations"] = positions if positions
    end

    # How a job of `klass` holding its idempotency key releases it: `[until_executed, ttl,
    # reschedule]` (at its start, for a class without the deduplication DSL).
    def release_options(klass)
      klass.respond_to?(:deduplication_server_options) ? klass.deduplication_server_options : Worker::Deduplication::RELEASE_AT_START
    end

    # Malformed JSON, or JSON that is not a job hash, goes straight to the dead set, as in Sidekiq.
    def parse(raw)
      valid(JSON.parse(raw), raw)
    rescue JSON::ParserError, EncodingError => e
      bury(raw, e)
    end

    def valid(job, raw)
      return job if job.is_a?(Hash) && job["args"].is_a?(Array)

      bury(raw, InvalidJob.new("job is not a Hash with an \"args\" Array"))
    end

    def bury(raw, error)
      engine_call { @fetcher.bury }
      @config.report_error(error, context: "invalid job data", jobstr: raw)
      nil
    end

    # What a job of class `name` needs looked up, once per name and thread (ClassInfo).
    def class_info(name)
      @classes[name] ||= ClassInfo.of(constantize(name))
    end

    def constantize(name)
      Object.const_get(name.to_s)
    rescue NameError
      raise unless CLASS_ALIASES.key?(name)

      Object.const_get(CLASS_ALIASES[name])
    end
  end
end
