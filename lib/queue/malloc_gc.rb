# frozen_string_literal: true

module JobQueue
  # A server's minor GC driven by malloc (config.gc_malloc_growth; ARCHITECTURE.md, "Memory").
  #
  # Ruby starts a GC when its heap runs out of free slots, and then sweeps lazily: a dead String's
  # buffer is freed only when its page is swept, during the next cycle. Jobs that allocate few objects
  # but large buffers (the redis gem's 16 KB socket reads: one `INCR` leaves ~33 KB) therefore keep
  # up to ~300 jobs' worth of dead buffers in malloc, ~10 MB of a -c 10 process, and Ruby's own
  # malloc limit never fires because the lazy sweep's frees offset what the jobs allocate. Every
  # CHECK_EVERY jobs a processor compares the bytes malloc holds in use with the lowest seen since the
  # last GC; when they grew by `growth` bytes it runs a minor GC with an immediate sweep, which frees
  # them at once. Jobs that allocate little never trigger it; those that do pay a minor GC (~1 ms
  # on a -c 10 mix server) per `growth` bytes, which Ruby would have run soon anyway.
  class MallocGc
    CHECK_EVERY = 32

    # The process's one instance for `growth` bytes (nil: off, or where malloc is not glibc's).
    def self.for(growth)
      return nil unless growth && Native.malloc_in_use

      @lock ||= Mutex.new
      @lock.synchronize { @instance = nil if @instance&.growth != growth; @instance ||= new(growth) }
    end

    attr_reader :growth, :runs

    def initialize(growth)
      @growth = growth
      @jobs = 0
      @runs = 0
      @low = Native.malloc_in_use
    end

    # Called by a processor thread after each job (holding the GVL).
    def job_done
      return unless ((@jobs += 1) % CHECK_EVERY).zero?

      in_use = Native.malloc_in_use
      if in_use - @low >= @growth
        GC.start(full_mark: false, immediate_sweep: true)
        @runs += 1
        @low = Native.malloc_in_use
      elsif in_use < @low
        @low = in_use
      end
    end
  end
end
