# frozen_string_literal: true

# Counts finished blank jobs inside a benchmark server, so the benchmark can tell when every job has
# run: when the BENCH_N-th one finishes, it writes the count to the file BENCH_DONE. This is the
# only work a blank job does (a mutex-guarded increment, well under a microsecond); it adds no Redis
# command, so Redis's CPU per job is the server's alone.
module BlankCounter
  TARGET = Integer(ENV.fetch("BENCH_N"))
  DONE = ENV.fetch("BENCH_DONE")
  LOCK = Mutex.new
  @count = 0

  def self.tick
    count = LOCK.synchronize { @count += 1 }
    File.write(DONE, count.to_s) if count == TARGET
  end
end
