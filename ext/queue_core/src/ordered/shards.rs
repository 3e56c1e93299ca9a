//! Each shard of an ordered queue as an operator sees it: how many ids it holds queued, how late its
//! oldest due id is, how many of its ids are in flight, and who owns its lease until when.
//!
//! A lease is valid while its owner beats in the queue's members set (see [`super::lease`]), so its
//! expiry is the owner's last beat plus [`DEAD_AFTER`]; an owner missing from the members (pruned, or
//! it left) holds a lapsed lease that the next beat of a live process takes over.
//!
//! One pipelined round trip of `4 + 2 × shards_count` commands: never a scan, never a read of ids.

use std::collections::BTreeMap;

use redis::Value;

use crate::error::{Error, Result};
use crate::link::blocking::SyncConn;
use crate::liveness::DEAD_AFTER;

use super::stats::lag;
use super::{reply_array, reply_f64, reply_string, OrderedQueue};

/// Who holds a shard's lease.
#[derive(Debug, Clone, PartialEq)]
pub struct Owner {
    /// The owning process's identity (`host:pid:nonce`, as in `processes`).
    pub identity: String,
    /// Redis time (seconds) of the owner's last lease beat, if it is still among the members.
    pub last_beat: Option<f64>,
    /// Redis time at which the lease lapses unless the owner beats again.
    pub expires_at: Option<f64>,
    /// Whether the lease is valid now (its owner beat less than `DEAD_AFTER` ago).
    pub alive: bool,
}

/// One shard.
#[derive(Debug, Clone, PartialEq)]
pub struct Shard {
    pub index: u32,
    /// Queued ids (fresh and retrying; those in processing are not queued).
    pub length: u64,
    /// Seconds the shard's oldest due id is late (Lowkiq's lag, per shard).
    pub lag: f64,
    /// Ids of the shard in processing.
    pub busy: u64,
    pub owner: Option<Owner>,
}

/// Every shard of `queue`, in order, read in one round trip.
pub fn shards(conn: &mut SyncConn, queue: &OrderedQueue) -> Result<Vec<Shard>> {
    let keys = queue.keys();
    let mut pipe = redis::pipe();
    pipe.cmd("TIME");
    pipe.cmd("HGETALL").arg(keys.leases());
    pipe.cmd("ZRANGE")
        .arg(keys.members())
        .arg(0)
        .arg(-1)
        .arg("WITHSCORES");
    pipe.cmd("HGETALL").arg(keys.processing_length_by_shard());
    for s in 0..queue.shards_count() {
        pipe.cmd("ZCARD").arg(keys.ids_scored_by_perform_in(s));
        pipe.cmd("ZRANGE")
            .arg(keys.ids_scored_by_perform_in(s))
            .arg(0)
            .arg(0)
            .arg("WITHSCORES");
    }
    let replies: Vec<Value> = conn.pipe(&pipe)?;
    let mut it = replies.into_iter();
    let mut next = || it.next().ok_or_else(|| Error::redis("shards: short reply"));
    let time: (u64, u64) =
        redis::from_redis_value(next()?).map_err(|e| Error::redis(format!("shards: TIME: {e}")))?;
    let now = time.0 as f64 + time.1 as f64 / 1e6;
    let leases = by_shard(next()?, "leases")?;
    let members: BTreeMap<String, f64> = pairs(next()?, "members")?
        .into_iter()
        .map(|(who, at)| Ok((reply_string(who, "member")?, reply_f64(at, "beat")?)))
        .collect::<Result<_>>()?;
    let in_flight = by_shard(next()?, "processing lengths")?;
    let mut out = Vec::with_capacity(queue.shards_count() as usize);
    for index in 0..queue.shards_count() {
        let length: u64 = redis::from_redis_value(next()?)
            .map_err(|e| Error::redis(format!("shards: ZCARD: {e}")))?;
        let oldest = pairs(next()?, "oldest id")?
            .into_iter()
            .next()
            .map(|(_, at)| reply_f64(at, "perform_in"))
            .transpose()?;
        let owner = leases.get(&index).map(|identity| {
            let last_beat = members.get(identity).copied();
            let expires_at = last_beat.map(|at| at + DEAD_AFTER.as_secs_f64());
            Owner {
                identity: identity.clone(),
                last_beat,
                expires_at,
                alive: expires_at.is_some_and(|at| at > now),
            }
        });
        out.push(Shard {
            index,
            length,
            lag: lag(now, oldest),
            busy: in_flight
                .get(&index)
                .and_then(|n| n.parse::<i64>().ok())
                .map_or(0, |n| n.max(0) as u64),
            owner,
        });
    }
    Ok(out)
}

/// `member, score` pairs of a `WITHSCORES` reply (flat in RESP2, nested in RESP3), or of `HGETALL`.
fn pairs(v: Value, what: &str) -> Result<Vec<(Value, Value)>> {
    let mut flat = Vec::new();
    for item in reply_array(v, what)? {
        match item {
            Value::Array(pair) => flat.extend(pair),
            other => flat.push(other),
        }
    }
    let mut items = flat.into_iter();
    let mut out = Vec::new();
    while let Some(a) = items.next() {
        let b = items
            .next()
            .ok_or_else(|| Error::redis(format!("{what}: an odd number of items")))?;
        out.push((a, b));
    }
    Ok(out)
}

/// A hash `shard → text`; fields that are not shard numbers are skipped (not ours to read).
fn by_shard(v: Value, what: &str) -> Result<BTreeMap<u32, String>> {
    let v = match v {
        // RESP3 answers HGETALL with a map.
        Value::Map(entries) => {
            Value::Array(entries.into_iter().flat_map(|(k, v)| [k, v]).collect())
        }
        other => other,
    };
    let mut out = BTreeMap::new();
    for (field, value) in pairs(v, what)? {
        if let Ok(s) = reply_string(field, what)?.parse::<u32>() {
            out.insert(s, reply_string(value, what)?);
        }
    }
    Ok(out)
}
