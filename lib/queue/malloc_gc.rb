# frozen_string_literal: true

module JobQueue
  # A server's minor GC driven by malloc (config.gc_malloc_growth; ARCHITECTURE.md, "Memory").
  #
  # Ruby starts a GC when its heap runs out of free slots, and then sweeps lazily: a dead String's
  # buffer is freed only when its page is swept, during the next cycle. Jobs that allocate few objects
  # but large buffers (the redis gem's 16 KB socket reads: one `INCR` leaves ~33 KB) therefore keep
  # up to ~300 jobs' worth of dead buffers in malloc, ~10 MB of a -c 10 process; Ruby's own malloc
  # limit does not fire, because the lazy sweep's frees are taken off the bytes it counts. Every
  # CHECK_EVERY jobs a processor reads those bytes (GC.stat's malloc_increase_bytes, what Ruby
  # malloc'd since its last GC less what it freed); at `growth` it runs a minor GC with an immediate
  # sweep, which frees the dead buffers at once and leaves no lazy sweep to offset the next count.
  # Jobs that malloc little never trigger it.
  class MallocGc
    CHECK_EVERY = 8

    # The process's one instance for `growth` bytes (nil: off).
    def self.for(growth)
      return nil unless growth

      @lock ||= Mutex.new
      @lock.synchronize { @instance = nil if @instance&.growth != growth; @instance ||= new(growth) }
    end

    attr_reader :growth, :runs

    def initialize(growth)
      @growth = growth
      @jobs = 0
      @runs = 0
    end

    # Called by a processor thread after each job it ran in Ruby (holding the GVL).
    def job_done
      check if ((@jobs += 1) % CHECK_EVERY).zero?
    end

    # Looks at the bytes and collects if they reached `growth`: every CHECK_EVERY jobs, called by
    # #job_done and by the engine's loop for the jobs it runs itself (Fetcher#run).
    def check
      return if GC.stat(:malloc_increase_bytes) < @growth

      GC.start(full_mark: false, immediate_sweep: true)
      @runs += 1
    end
  end
end
