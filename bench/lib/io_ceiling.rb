# frozen_string_literal: true

# The bare-Ruby ceiling of bench/io_bound.rb, run as a process of its own (as a server is):
#
#   ruby bench/lib/io_ceiling.rb THREADS SLEEP TOTAL
#
# THREADS Ruby threads each loop on `sleep(SLEEP)` followed by the same mutex-guarded count a
# benchmark job ends with (bench/apps/blank_counter.rb), until TOTAL iterations have been counted
# between them. Prints one JSON line: the seconds from the threads' start to the TOTAL-th count, the
# process's CPU seconds and its threads' context switches (voluntary, involuntary) over the same span. Nothing else runs: no Redis, no job, no framework.
#
# SPIN=N (not used by io_bound.rb) adds a loop of N empty steps after each sleep, work done with the
# GVL held as a server's own per-job work is (~90 steps a microsecond here): what such work costs
# the ceiling itself (ARCHITECTURE.md, "What the GVL charges for a job's own work").
require "json"

threads, pause, total = ARGV.fetch(0).to_i, Float(ARGV.fetch(1)), ARGV.fetch(2).to_i
spin = Integer(ENV.fetch("SPIN", "0"))
work = if spin.positive?
  lambda do
    i = 0
    i += 1 while i < spin
  end
end
lock = Mutex.new
count = 0
finished = Queue.new
cpu = -> { Process.clock_gettime(Process::CLOCK_PROCESS_CPUTIME_ID) }
# [voluntary, involuntary] switches of every thread of this process so far.
switches = lambda do
  Dir.glob("/proc/self/task/*/status").each_with_object([0, 0]) do |file, sums|
    File.foreach(file) do |line|
      sums[0] += line.split.last.to_i if line.start_with?("voluntary_ctxt_switches")
      sums[1] += line.split.last.to_i if line.start_with?("nonvoluntary_ctxt_switches")
    end
  end
end
start = Process.clock_gettime(Process::CLOCK_MONOTONIC)
cpu_start = cpu.call
switches_start = switches.call
workers = Array.new(threads) do
  Thread.new do
    loop do
      sleep pause
      work&.call
      n = lock.synchronize { count += 1 }
      finished << [Process.clock_gettime(Process::CLOCK_MONOTONIC), cpu.call, switches.call] if n == total
      break if n >= total
    end
  end
end
at, cpu_at, switches_at = finished.pop
workers.each(&:join)
puts JSON.generate("seconds" => at - start, "cpu_seconds" => cpu_at - cpu_start,
  "voluntary_switches" => switches_at[0] - switches_start[0], "involuntary_switches" => switches_at[1] - switches_start[1])
