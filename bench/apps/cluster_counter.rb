# frozen_string_literal: true

# Counts finished jobs inside each process of a cluster benchmark (bench/cluster.rb), whose jobs are
# split between processes none of which knows when the last one runs: a thread of each process
# writes its count to BENCH_DONE_DIR/<pid> every 5 ms while it changes, and the benchmark adds the
# files up. A job's only work besides its own is a mutex-guarded increment; no Redis command, so
# Redis's CPU per job is the server's alone.
module ClusterCounter
  DIR = ENV.fetch("BENCH_DONE_DIR")
  LOCK = Mutex.new
  @count = 0
  @writer = nil

  def self.tick
    LOCK.synchronize { @count += 1 }
    start_writer unless @writer&.alive?
  end

  # Started by the first job of each process (after the fork, for a cluster child).
  def self.start_writer
    LOCK.synchronize do
      return if @writer&.alive?

      path = File.join(DIR, Process.pid.to_s)
      @writer = Thread.new do
        written = nil
        loop do
          count = @count
          File.write(path, count.to_s) if count != written
          written = count
          sleep 0.005
        end
      end
    end
  end
end
