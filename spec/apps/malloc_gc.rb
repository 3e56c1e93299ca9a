# frozen_string_literal: true

# A server whose job leaves `kb` KB of dead String buffers behind and reports how many minor GCs the
# server's malloc-driven GC has run (lib/queue/malloc_gc.rb), for spec/api/malloc_gc_spec.rb.
# GC_GROWTH: config.gc_malloc_growth in bytes, or "off" for nil.
require_relative "basic"

growth = ENV.fetch("GC_GROWTH", "default")
JobQueue.configure { |c| c.gc_malloc_growth = growth == "off" ? nil : Integer(growth) } unless growth == "default"

class GarbageWorker
  include JobQueue::Worker

  def perform(kb)
    Array.new(kb / 16) { "x" * 16_384 } # dead when perform returns
    gc = JobQueue::MallocGc.for(JobQueue.config.gc_malloc_growth)
    Record.redis.rpush("malloc_gc", gc ? gc.runs : -1)
  end
end
