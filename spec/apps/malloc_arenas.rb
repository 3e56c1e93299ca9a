# frozen_string_literal: true

# A server whose job reports how many glibc malloc arenas its process has (malloc_info's <heap>
# entries), for spec/api/malloc_arenas_spec.rb. ARENA_MAX=off sets `malloc_arena_max = nil`.
require "fiddle"
require_relative "basic"

JobQueue.configure { |c| c.malloc_arena_max = nil } if ENV["ARENA_MAX"] == "off"

module MallocInfo
  LIBC = Fiddle.dlopen(nil)
  FOPEN = Fiddle::Function.new(LIBC["fopen"], [Fiddle::TYPE_VOIDP, Fiddle::TYPE_VOIDP], Fiddle::TYPE_VOIDP)
  FCLOSE = Fiddle::Function.new(LIBC["fclose"], [Fiddle::TYPE_VOIDP], Fiddle::TYPE_INT)
  INFO = Fiddle::Function.new(LIBC["malloc_info"], [Fiddle::TYPE_INT, Fiddle::TYPE_VOIDP], Fiddle::TYPE_INT)

  # The arenas glibc has made in this process so far.
  def self.arenas
    path = File.join(ENV.fetch("QUEUE_TEST_DIR"), "malloc-#{Process.pid}-#{Thread.current.object_id}.xml")
    file = FOPEN.call(path, "w")
    INFO.call(0, file)
    FCLOSE.call(file)
    File.read(path).scan("<heap nr=").size
  ensure
    File.delete(path) if path && File.exist?(path)
  end
end

class ArenaCountWorker
  include JobQueue::Worker

  def perform
    Record.redis.rpush("arenas", MallocInfo.arenas)
  end
end
