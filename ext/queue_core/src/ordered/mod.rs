//! Ordered jobs (issue #6): Lowkiq's model on Lowkiq's v1 Redis layout (WIRE.md §3).
//!
//! A job is an **id** with a sorted set of opaque **payloads** (scored by the client's score: a time or
//! a version), a `perform_in` and a `retry_count`. Jobs with the same id merge; the worker receives all
//! of an id's payloads at once, oldest first. An id never runs twice at the same time anywhere: while
//! it runs, its whole state sits in the `processing:*` keys, and a fetch skips ids found there. Ids are
//! spread over a fixed number of shards (CRC-32 of the id, as Lowkiq), and each shard is fetched by one
//! process at a time, the holder of its lease.
//!
//! The rooms:
//! - [`keys`]: the Lowkiq key names and the shard of an id;
//! - [`push`]: `perform_async` — a bulk of jobs merged in by one script call;
//! - [`fetch`]: take due ids of a held shard (`lag` or `seq` scheduler) into processing, one call;
//! - [`settle`]: success, or failure with retry and morgue, merged with what was pushed meanwhile;
//! - [`lease`]: who fetches which shard — balanced leases (or Lowkiq's static splitters), recovery of
//!   in-flight state whenever a shard changes hands;
//! - [`runner`]: the beat thread that keeps a process's leases and tells each processor thread its
//!   shards;
//! - [`morgue`]: listing the morgue and the dashboard's actions;
//! - [`stats`]: Lowkiq's `/api/v1/stats` document;
//! - [`shards`]: each shard's length, lag, in-flight ids and lease owner (the dashboard's view).
//!
//! Payloads are bytes to the engine: JSON by default, `Marshal` bytes only when the Ruby side opts in,
//! so nothing here ever parses one. Every state change is one Lua script call (one round trip), so a
//! fetch and a settle each cost one round trip whatever the batch size.
//!
//! What a binding calls (all synchronous, on the caller's [`crate::link::blocking::SyncConn`], so the Ruby
//! side releases the GVL around them):
//! - client: [`OrderedQueue::new`], [`push::push`] with [`push::NewJob`]s;
//! - server: [`lease::Ownership::new`] per queue, [`runner::OrderedShards::start`] once per process
//!   (first beat inside), then per processor thread an [`fetch::OrderedFetcher`] looping on
//!   [`fetch::OrderedFetcher::settle_and_fetch`] with the shards
//!   [`runner::OrderedShards::thread_shards`] gives it, and [`runner::OrderedShards::stop`] last;
//! - dashboard: [`morgue`]'s functions and [`stats::stats`].
//!
//! Merge rules (the document's, which Lowkiq's code implements):
//! - payloads union; identical bytes keep the lowest score;
//! - new + queued keeps the queued `perform_in`/`retry_count`;
//! - failed (or recovered in-flight) + queued takes the failed job's `perform_in`/`retry_count`;
//! - morgue + queued (a requeue from the morgue) gets `perform_in = now`, `retry_count = -1`.

pub mod fetch;
pub mod keys;
pub mod lease;
pub mod morgue;
pub mod push;
pub mod runner;
pub mod scripts;
pub mod settle;
pub mod shards;
pub mod stats;

use redis::Value;

use crate::error::{Error, Result};
pub use keys::{shard_of, OrderedKeys};

/// One ordered queue: its keys and its fixed number of shards.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrderedQueue {
    keys: OrderedKeys,
    shards_count: u32,
}

impl OrderedQueue {
    /// `namespace` as the engine's (`Keys::namespace`); `shards_count` as the worker's (Lowkiq's
    /// default is 5). Changing it moves ids to other shards: Lowkiq's advice (a new queue name) holds.
    pub fn new(namespace: &str, name: &str, shards_count: u32) -> Result<OrderedQueue> {
        if name.is_empty() {
            return Err(Error::InvalidArgument(
                "an ordered queue needs a name".to_owned(),
            ));
        }
        if shards_count == 0 {
            return Err(Error::InvalidArgument(format!(
                "ordered queue {name:?}: shards_count must be at least 1"
            )));
        }
        Ok(OrderedQueue {
            keys: OrderedKeys::new(namespace, name),
            shards_count,
        })
    }

    pub fn name(&self) -> &str {
        self.keys.queue()
    }

    pub fn keys(&self) -> &OrderedKeys {
        &self.keys
    }

    pub fn shards_count(&self) -> u32 {
        self.shards_count
    }

    pub fn shard_of(&self, id: &str) -> u32 {
        shard_of(id, self.shards_count)
    }
}

/// One payload and its score, as stored in a `payloads:<id>` sorted set.
pub type Payload = (Vec<u8>, f64);

// ---- reading script replies ----------------------------------------------------------------------

fn unexpected(what: &str, v: &Value) -> Error {
    Error::redis(format!("unexpected reply for {what}: {v:?}"))
}

fn reply_bytes(v: Value, what: &str) -> Result<Vec<u8>> {
    match v {
        Value::BulkString(b) => Ok(b),
        Value::SimpleString(s) => Ok(s.into_bytes()),
        Value::Int(i) => Ok(i.to_string().into_bytes()),
        other => Err(unexpected(what, &other)),
    }
}

fn reply_string(v: Value, what: &str) -> Result<String> {
    String::from_utf8(reply_bytes(v, what)?)
        .map_err(|_| Error::redis(format!("{what} is not UTF-8")))
}

fn reply_f64(v: Value, what: &str) -> Result<f64> {
    let s = reply_string(v, what)?;
    s.parse::<f64>()
        .map_err(|_| Error::redis(format!("{what}: {s:?} is not a number")))
}

fn reply_array(v: Value, what: &str) -> Result<Vec<Value>> {
    match v {
        Value::Array(items) => Ok(items),
        Value::Nil => Ok(Vec::new()),
        other => Err(unexpected(what, &other)),
    }
}

/// A flat `member, score, member, score, …` list (ZRANGE … WITHSCORES in a script).
fn reply_payloads(v: Value, what: &str) -> Result<Vec<Payload>> {
    let mut items = reply_array(v, what)?.into_iter();
    let mut out = Vec::new();
    while let Some(member) = items.next() {
        let score = items
            .next()
            .ok_or_else(|| Error::redis(format!("{what}: a member without a score")))?;
        out.push((reply_bytes(member, what)?, reply_f64(score, what)?));
    }
    Ok(out)
}

/// A float as Redis reads it back exactly (Rust prints the shortest form that round-trips).
fn score_arg(x: f64, what: &str) -> Result<String> {
    if x.is_finite() {
        Ok(format!("{x}"))
    } else {
        Err(Error::InvalidArgument(format!(
            "{what} must be a finite number, not {x}"
        )))
    }
}
