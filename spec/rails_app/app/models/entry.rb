# frozen_string_literal: true

# One row per thing a job did: kind names the worker, key the job. `held_connection` says whether the
# job's thread still held a database connection when the job started (left over from its last job:
# the reloader around each job in `bundle exec queue` should have given it back).
class Entry < ApplicationRecord
  def self.write!(kind, key, value, replace: false, held: connection_held?)
    row = replace ? find_or_initialize_by(kind: kind, key: key) : new(kind: kind, key: key)
    row.update!(value: value, held_connection: held)
  end

  def self.connection_held?
    !connection_pool.active_connection?.nil?
  end
end
