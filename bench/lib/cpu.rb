# frozen_string_literal: true

require "etc"

module Bench
  # CPU time from /proc: of one process (all its threads), and of the whole machine.
  module Cpu
    TICK = Etc.sysconf(Etc::SC_CLK_TCK).to_f

    module_function

    # User + system seconds of process `pid` so far (utime and stime of /proc/<pid>/stat, which
    # count every thread). Read it while the process is alive: a reaped process has no entry.
    def process_seconds(pid)
      # Fields after the command name, which is in parentheses and may hold spaces.
      fields = File.read("/proc/#{pid}/stat").split(")").last.split
      # utime and stime are fields 14 and 15 of the whole line, 12 and 13 after "pid (comm)".
      (fields[11].to_i + fields[12].to_i) / TICK
    end

    # [busy, total] CPU seconds of all cores since boot, from the first line of /proc/stat
    # (busy is everything but idle and iowait).
    def machine_seconds
      user, nice, system, idle, iowait, irq, softirq, steal = File.readlines("/proc/stat").first.split[1, 8].map(&:to_i)
      busy = user + nice + system + irq + softirq + steal
      [busy / TICK, (busy + idle + iowait) / TICK]
    end

    # This process's own CPU seconds (all threads).
    def self_seconds
      Process.clock_gettime(Process::CLOCK_PROCESS_CPUTIME_ID)
    end

    def loadavg
      File.read("/proc/loadavg").split[0, 3].map(&:to_f)
    end

    def cores
      Etc.nprocessors
    end
  end
end
