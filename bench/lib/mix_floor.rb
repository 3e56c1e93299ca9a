# frozen_string_literal: true

# The memory floor of bench/mix.rb, run as a process of its own (as a server is):
#
#   ruby bench/lib/mix_floor.rb STATUS_FILE
#
# BENCH_CONCURRENCY bare Ruby threads run the mix's job (bench/apps/mix_work.rb, the code both
# servers run) BENCH_N times between them, on the pushed jobs' row ids (Bench::MixDb.args), with no server:
# no fetch, no queue, no framework, no engine. What is left is the Ruby VM, the app's gems and the
# job's own garbage, which is what any server running this app in one process holds at least.
#
# FLOOR_MALLOC_GC (bytes) and FLOOR_MALLOC_TRIM (seconds), when set, apply queue's own memory
# settings (config.gc_malloc_growth, with queue's lib/queue/malloc_gc.rb itself, and
# config.malloc_trim_interval, through Fiddle); the runner sets MALLOC_ARENA_MAX in the environment
# for config.malloc_arena_max. Unset, the process runs as Ruby and glibc start by default, as
# Sidekiq does.
#
# Writes one JSON object to STATUS_FILE: /proc/self/status figures (kB) at the first job and at the
# end, smaps_rollup's at the end, the seconds and the GC count. The job writes BENCH_PROGRESS and
# BENCH_DONE itself, as it does in a server.
require "json"
require_relative "../apps/mix_work"
require_relative "mix_db"
require_relative "proc_memory"

module MixFloor
  module_function

  def run(status_file)
    started = monotonic
    jobs = MixWork::TARGET
    threads = Integer(ENV.fetch("BENCH_CONCURRENCY"))
    gc = malloc_gc
    start_trimming
    first = nil
    next_index = 0
    lock = Mutex.new
    workers = Array.new(threads) do
      Thread.new do
        while (index = lock.synchronize { next_index < jobs ? (next_index += 1) - 1 : nil })
          MixWork.perform(*Bench::MixDb.args(index))
          first ||= Bench::ProcMemory.status
          gc&.job_done
        end
      end
    end
    workers.each(&:join)
    File.write(status_file, JSON.generate(
      "seconds" => monotonic - started, "gc_count" => GC.count, "start" => first,
      "end" => Bench::ProcMemory.status.merge("smaps_rollup" => Bench::ProcMemory.rollup)
    ))
  end

  def malloc_gc
    growth = ENV["FLOOR_MALLOC_GC"]
    return nil unless growth

    require_relative "../../lib/queue/malloc_gc"
    JobQueue::MallocGc.for(Integer(growth))
  end

  # malloc_trim(0) every FLOOR_MALLOC_TRIM seconds, from a thread of its own (queue's engine calls it
  # from its blocking pool, off the job threads).
  def start_trimming
    interval = ENV["FLOOR_MALLOC_TRIM"]
    return unless interval

    require "fiddle"
    trim = Fiddle::Function.new(Fiddle::Handle::DEFAULT["malloc_trim"], [Fiddle::TYPE_SIZE_T], Fiddle::TYPE_INT)
    Thread.new do
      loop do
        sleep Float(interval)
        trim.call(0)
      end
    end
  end

  def monotonic = Process.clock_gettime(Process::CLOCK_MONOTONIC)
end

MixFloor.run(ARGV.fetch(0)) if $PROGRAM_NAME == __FILE__
