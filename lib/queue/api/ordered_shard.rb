# frozen_string_literal: true

module JobQueue
  # One shard of an ordered queue, as OrderedQueue#shards reads it:
  #
  # - `index`; `length`: ids queued in it; `lag`: seconds its oldest due id is late; `busy`: its ids
  #   running now;
  # - `owner`: the identity (`host:pid:nonce`, as ProcessSet shows it) of the process holding its
  #   lease, or nil; `last_beat`: when that process last renewed its leases; `lease_expires_at`: when
  #   the lease lapses unless it beats again (past, or nil once the silent process has been pruned);
  #   `alive?`: whether the lease is valid now. A lapsed lease is taken over by a live process at its
  #   next beat.
  OrderedShard = Struct.new(:index, :length, :lag, :busy, :owner, :last_beat, :lease_expires_at, :alive) do
    def self.from_engine(row)
      index, length, lag, busy, owner, beat, expires, alive = row
      new(index, length, lag, busy, owner, beat && Time.at(beat), expires && Time.at(expires), alive)
    end

    alias_method :size, :length

    def owned? = !owner.nil?

    def alive? = alive

    def to_h
      {"shard" => index, "length" => length, "lag" => lag, "busy" => busy, "owner" => owner,
       "last_beat" => last_beat&.to_f, "lease_expires_at" => lease_expires_at&.to_f, "alive" => alive}
    end
  end
end
