# frozen_string_literal: true

# The realistic job of bench/mix.rb, shared by its queue and Sidekiq apps: read one row from SQLite,
# then make one Redis call through the app's own redis gem, as a Rails app's job would.
#
# - SQLite: the database file BENCH_DB (10,000 rows, made by bench/lib/mix_db.rb), one read-only
#   connection per job thread with its prepared statement, as Active Record holds one connection per
#   thread.
# - Redis: the redis gem (4.8, the one Sidekiq 6.4.1 uses) through a ConnectionPool of `Redis`
#   clients sized to the concurrency (BENCH_CONCURRENCY), at REDIS_URL; one INCR of a key derived
#   from the row (1,000 distinct keys, so Redis's memory stays flat).
#
# Counting: when the BENCH_N-th job finishes it writes the count to BENCH_DONE; every BENCH_EVERY
# jobs (0: never) it appends "count VmRSS VmHWM" (kB, from /proc/self/status, read at that moment
# in the server's own process) to BENCH_PROGRESS, for the RSS figures.
require "sqlite3"
require "redis"
require "connection_pool"

Redis.silence_deprecations = true if Redis.respond_to?(:silence_deprecations=)

module MixWork
  DB_PATH = ENV.fetch("BENCH_DB")
  TARGET = Integer(ENV.fetch("BENCH_N"))
  DONE = ENV.fetch("BENCH_DONE")
  EVERY = Integer(ENV.fetch("BENCH_EVERY", "0"))
  PROGRESS = ENV["BENCH_PROGRESS"]
  REDIS = ConnectionPool.new(size: Integer(ENV.fetch("BENCH_CONCURRENCY")), timeout: 5) { Redis.new(url: ENV.fetch("REDIS_URL")) }
  SELECT = "SELECT id, name, value FROM items WHERE id = ?"
  LOCK = Mutex.new
  @count = 0

  module_function

  def perform(id)
    _id, name, _value = statement.execute(id).first
    raise ArgumentError, "no row #{id}" if name.nil?

    REDIS.with { |redis| redis.incr("mix:#{name}") }
    tick
  end

  # This thread's prepared statement on its own connection.
  def statement
    Thread.current[:mix_statement] ||= SQLite3::Database.new(DB_PATH, readonly: true).prepare(SELECT)
  end

  def tick
    count = LOCK.synchronize { @count += 1 }
    File.open(PROGRESS, "a") { |f| f.puts("#{count} #{memory.join(" ")}") } if EVERY.positive? && (count % EVERY).zero?
    File.write(DONE, count.to_s) if count == TARGET
  end

  # [VmRSS, VmHWM] of this process, in kB.
  def memory
    status = File.read("/proc/self/status")
    %w[VmRSS VmHWM].map { |field| status[/^#{field}:\s+(\d+)/, 1].to_i }
  end
end
