# frozen_string_literal: true

module JobQueue
  module Cluster
    # `--max-memory 2G`: the limit, and each child's resident set size as Linux reports it.
    module Memory
      UNITS = {"K" => 1024, "M" => 1024**2, "G" => 1024**3}.freeze

      module_function

      # Bytes of "512M", "2G", "1.5G", "900K" (a trailing "B" is allowed: "2GB"). A number without a
      # unit is refused: is it bytes, kilobytes or megabytes?
      def parse_size(text)
        match = /\A\s*(\d+(?:\.\d+)?)\s*([KMG])B?\s*\z/i.match(text.to_s)
        raise ArgumentError, "--max-memory #{text}: give a size with a unit, K, M or G (e.g. 2G or 512M)" unless match

        bytes = (match[1].to_f * UNITS.fetch(match[2].upcase)).to_i
        raise ArgumentError, "--max-memory #{text}: must be more than 0" unless bytes.positive?

        bytes
      end

      # The process's resident set size in bytes (VmRSS of /proc/<pid>/status), or nil when it is gone.
      def rss(pid)
        line = File.foreach("/proc/#{pid}/status").find { |l| l.start_with?("VmRSS:") }
        line && line[/\d+/].to_i * 1024
      rescue Errno::ENOENT, Errno::ESRCH
        nil
      end

      # "1.5 GB", "300 MB", for log lines.
      def human(bytes)
        return format("%.1f GB", bytes.to_f / UNITS["G"]) if bytes >= UNITS["G"]
        return format("%d MB", bytes / UNITS["M"]) if bytes >= UNITS["M"]

        format("%d KB", bytes / UNITS["K"])
      end
    end
  end
end
