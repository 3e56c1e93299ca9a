# frozen_string_literal: true

require "json"
require "fileutils"
require "time"
require_relative "cpu"
require_relative "redis_server"

module Bench
  # Medians, plain-text tables and the JSON record of a run.
  module Report
    RESULTS_DIR = File.expand_path("../results", __dir__)

    module_function

    def median(values)
      sorted = values.compact.sort
      return nil if sorted.empty?

      mid = sorted.size / 2
      sorted.size.odd? ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2.0
    end

    # The nearest-rank percentile `pct` (0-100] of `values`: with 100 values, p99 is the second largest.
    def percentile(values, pct)
      sorted = values.sort
      sorted[[(sorted.size * pct / 100.0).ceil - 1, 0].max]
    end

    # The median of each numeric field over a list of result hashes.
    def medians(results, fields)
      fields.to_h { |f| [f, median(results.map { |r| r[f] })] }
    end

    def ratio(ours, theirs)
      return nil if ours.nil? || theirs.nil? || theirs.zero?

      ours / theirs
    end

    # A number with thousands separators and `digits` decimals; "-" for nil.
    def num(value, digits = 0)
      return "-" if value.nil?

      whole, frac = format("%.#{digits}f", value).split(".")
      whole = whole.reverse.scan(/\d{1,3}/).join(",").reverse.prepend(whole.start_with?("-") ? "-" : "")
      frac ? "#{whole}.#{frac}" : whole
    end

    def times(value)
      value.nil? ? "-" : format("%.2f×", value)
    end

    # One server drain (ThroughputRun and OrderedRun) as a table row.
    # What a drain benchmark (throughput.rb, ordered.rb) measures of each run, and its tables' header.
    DRAIN_FIELDS = %w[jobs_per_s server_cpu_us_per_job redis_cpu_us_per_job seconds boot_seconds
      server_cores redis_cores other_processes_cores].freeze
    DRAIN_HEADER = ["", "jobs/s", "server CPU µs/job", "Redis CPU µs/job", "drain s", "boot s", "other procs (cores)"].freeze

    # jobs/s and CPU per job of one drain's medians over another's.
    def drain_ratios(run, base)
      DRAIN_FIELDS.first(3).to_h { |f| [f, ratio(run[f], base[f])] }
    end

    def drain_ratio_row(label, ratios)
      [label, times(ratios["jobs_per_s"]), times(ratios["server_cpu_us_per_job"]),
        times(ratios["redis_cpu_us_per_job"]), "", "", ""]
    end

    # Every kind of every round, a row each.
    def rounds_table(rounds, kinds)
      table(DRAIN_HEADER, rounds.each_with_index.flat_map { |rd, i| kinds.map { |k| drain_row("#{i + 1}: #{k}", rd.fetch(k)) } })
    end

    def drain_row(label, m)
      [label, num(m["jobs_per_s"]), num(m["server_cpu_us_per_job"], 1), num(m["redis_cpu_us_per_job"], 1),
        num(m["seconds"], 2), num(m["boot_seconds"], 2), num(m["other_processes_cores"], 2)]
    end

    # A goal as the reports print it: "met" or "MISSED", what, and the measured value.
    def target(what, met, value)
      "  #{met ? "met   " : "MISSED"}  #{what}: #{value}"
    end

    # Rows of strings as a table: first column left-aligned, the others right-aligned.
    def table(header, rows)
      all = [header, *rows]
      widths = header.each_index.map { |i| all.map { |r| r[i].to_s.size }.max }
      lines = all.map do |row|
        row.each_with_index.map { |cell, i| i.zero? ? cell.to_s.ljust(widths[i]) : cell.to_s.rjust(widths[i]) }.join("  ")
      end
      lines.insert(1, widths.map { |w| "-" * w }.join("  "))
      lines.join("\n")
    end

    # What the numbers were measured on.
    def machine(redis_version)
      {
        "cores" => Cpu.cores,
        "loadavg" => Cpu.loadavg,
        "ruby" => RUBY_DESCRIPTION,
        "redis_server" => redis_version,
        "redis_transport" => RedisServer.transport,
        "redis_gem" => Redis::VERSION,
        "sidekiq" => Sidekiq::VERSION,
        "queue" => JobQueue::VERSION
      }
    end

    def load_line(before, after)
      "machine: #{Cpu.cores} cores, load average #{before.map { |l| format("%.2f", l) }.join(" ")} before, " \
        "#{after.map { |l| format("%.2f", l) }.join(" ")} after; Redis over #{RedisServer.transport == "tcp" ? "TCP" : "a unix socket"}"
    end

    # Writes bench/results/<timestamp>-<name>.json and returns its path.
    def write_json(name, data)
      FileUtils.mkdir_p(RESULTS_DIR)
      stamp = Time.now.utc.strftime("%Y%m%dT%H%M%SZ")
      path = File.join(RESULTS_DIR, "#{stamp}-#{name}.json")
      File.write(path, JSON.pretty_generate(data) + "\n")
      path
    end
  end
end
