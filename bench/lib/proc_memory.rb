# frozen_string_literal: true

module Bench
  # A process's memory as /proc shows it, for the memory benchmarks (lib/rss_run.rb, lib/mix_floor.rb).
  # Needs nothing else, so a measured process can load it without the benchmark's clients.
  module ProcMemory
    STATUS_FIELDS = %w[VmRSS VmHWM RssAnon RssFile Threads].freeze
    ROLLUP_FIELDS = %w[Rss Pss Anonymous].freeze

    module_function

    # /proc/<pid>/status fields (kB; Threads a count).
    def status(pid = "self") = fields("/proc/#{pid}/status", STATUS_FIELDS)

    # /proc/<pid>/smaps_rollup fields (kB).
    def rollup(pid = "self") = fields("/proc/#{pid}/smaps_rollup", ROLLUP_FIELDS)

    def fields(file, names)
      text = File.read(file)
      names.to_h { |f| [f, text[/^#{f}:\s+(\d+)/, 1].to_i] }
    end
  end
end
