# frozen_string_literal: true

require "sqlite3"

module Bench
  # The SQLite database the mix's jobs read (bench/apps/mix_work.rb): ROWS rows of items(id, name,
  # value), names item-0 .. item-999 (the Redis keys the jobs INCR), in one file under `dir`.
  module MixDb
    ROWS = 10_000
    KEYS = 1000

    module_function

    # Makes the file and returns its path.
    def create(dir)
      path = File.join(dir, "mix.sqlite3")
      File.delete(path) if File.exist?(path)
      db = SQLite3::Database.new(path)
      db.execute("CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT NOT NULL, value INTEGER NOT NULL)")
      db.transaction do
        insert = db.prepare("INSERT INTO items (id, name, value) VALUES (?, ?, ?)")
        (1..ROWS).each { |id| insert.execute(id, "item-#{id % KEYS}", id * 7) }
        insert.close
      end
      path
    ensure
      db&.close
    end

    # One job's argument list: a row id, spread over the table.
    def args(index)
      [(index * 7919) % ROWS + 1]
    end
  end
end
