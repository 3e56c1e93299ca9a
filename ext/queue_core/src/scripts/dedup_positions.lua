-- Deduplication helpers, prepended to the push script: comparing replication positions.

-- A replication position: "hi/lo" in hex (a Postgres LSN such as "0/D525E3A8") or a plain number.
local function dedup_position(p)
  local hi, lo = string.match(p, '^(%x+)/(%x+)$')
  if hi then
    return tonumber(hi, 16), tonumber(lo, 16)
  end
  local n = tonumber(p)
  if n then
    return n, 0
  end
  return nil, nil
end

-- Whether position a is newer than b (b may be absent). Unreadable positions compare as strings.
local function dedup_newer(a, b)
  if not b then
    return true
  end
  local ah, al = dedup_position(a)
  local bh, bl = dedup_position(b)
  if not ah or not bh then
    return a > b
  end
  if ah ~= bh then
    return ah > bh
  end
  return al > bl
end
