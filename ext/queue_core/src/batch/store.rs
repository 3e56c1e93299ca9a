//! The Ruby API's side of batches: create and hold open (`batch_open.lua`), let go
//! (`batch_close.lua`), read a batch's status, list batches, invalidate.

use std::collections::HashMap;

use crate::clock::{float_string, now_f64};
use crate::error::Result;
use crate::link::blocking::SyncConn;
use crate::scripts;

/// What `batch_open.lua` writes for a new batch.
#[derive(Debug, Clone, Default)]
pub struct NewBatch {
    pub description: String,
    pub callback_queue: String,
    /// The callbacks as JSON (`{"complete":[[target, options], …], …}`), read back by the
    /// callback job.
    pub callbacks: String,
    /// Events that have at least one callback.
    pub events: Vec<String>,
    pub parent: Option<String>,
    pub expires_in: u64,
}

/// Creates batch `bid` when `create` holds and it does not exist; holds it open (`hold`) until
/// [`close`]. False when the batch does not exist and was not created.
pub fn open(conn: &mut SyncConn, bid: &str, new: Option<&NewBatch>, hold: bool) -> Result<bool> {
    let empty = NewBatch::default();
    let fields = new.unwrap_or(&empty);
    let mut inv = scripts::BATCH_OPEN.prepare_invoke();
    inv.arg(conn.keys().namespace())
        .arg(bid)
        .arg(float_string(now_f64()))
        .arg(if new.is_some() { "1" } else { "0" })
        .arg(if hold { "1" } else { "0" })
        .arg(&fields.description)
        .arg(&fields.callback_queue)
        .arg(&fields.callbacks)
        .arg(fields.parent.as_deref().unwrap_or(""))
        .arg(fields.expires_in);
    for event in &fields.events {
        inv.arg(event);
    }
    Ok(conn.script::<i64>(&inv)? == 1)
}

/// Lets go of a batch held open by [`open`]; fires what it completes.
pub fn close(conn: &mut SyncConn, bid: &str) -> Result<bool> {
    let mut inv = scripts::BATCH_CLOSE.prepare_invoke();
    inv.arg(conn.keys().namespace())
        .arg(bid)
        .arg(float_string(now_f64()));
    Ok(conn.script::<i64>(&inv)? == 1)
}

/// A batch as stored: its hash, its failed jobs' info and its dead jobs' info (by jid, JSON).
#[derive(Debug, Clone, Default)]
pub struct Stored {
    pub fields: HashMap<String, String>,
    pub failed: HashMap<String, String>,
    pub dead: HashMap<String, String>,
}

/// How many checker steps a status read runs at most before reading (see [`status`]).
const STATUS_CHECKS: usize = 50;

/// Reads batch `bid`; `None` when it does not exist (never did, or expired). The acks' markers not
/// yet counted by a checker are counted first (the checker's own step, any batch's), so `pending`
/// is exact when read, not behind by the checker's delay; a checks list refilled faster than it
/// drains is left after [`STATUS_CHECKS`] steps.
pub fn status(conn: &mut SyncConn, bid: &str) -> Result<Option<Stored>> {
    for _ in 0..STATUS_CHECKS {
        let taken: i64 = conn.script(&super::checker::invocation(conn.keys()))?;
        if taken < super::checker::PER_CALL {
            break;
        }
    }
    let key = conn.keys().batch(bid);
    let mut pipe = redis::pipe();
    pipe.cmd("HGETALL").arg(&key);
    pipe.cmd("HGETALL").arg(format!("{key}:failed"));
    pipe.cmd("HGETALL").arg(format!("{key}:dead"));
    let (fields, failed, dead): (HashMap<String, String>, _, _) = conn.pipe(&pipe)?;
    if fields.is_empty() {
        return Ok(None);
    }
    Ok(Some(Stored {
        fields,
        failed,
        dead,
    }))
}

/// Batch ids newest first, `count` from `offset`, with their creation times; forgets the ids whose
/// data has expired that it meets. Returns the page and the number of ids indexed.
pub fn list(conn: &mut SyncConn, offset: i64, count: i64) -> Result<(Vec<(String, f64)>, i64)> {
    let index = conn.keys().batches();
    let mut pipe = redis::pipe();
    pipe.cmd("ZREVRANGE")
        .arg(&index)
        .arg(offset)
        .arg(offset + count.max(1) - 1)
        .arg("WITHSCORES");
    pipe.cmd("ZCARD").arg(&index);
    let (page, size): (Vec<(String, f64)>, i64) = conn.pipe(&pipe)?;
    if page.is_empty() {
        return Ok((page, size));
    }
    let mut exists = redis::pipe();
    for (bid, _) in &page {
        exists.cmd("EXISTS").arg(conn.keys().batch(bid));
    }
    let found: Vec<i64> = conn.pipe(&exists)?;
    let (live, gone): (Vec<_>, Vec<_>) = page
        .into_iter()
        .zip(found)
        .partition(|(_, found)| *found == 1);
    if !gone.is_empty() {
        let mut forget = redis::cmd("ZREM");
        forget.arg(&index);
        for ((bid, _), _) in &gone {
            forget.arg(bid);
        }
        conn.cmd::<i64>(&forget)?;
    }
    Ok((
        live.into_iter().map(|(entry, _)| entry).collect(),
        size - gone.len() as i64,
    ))
}

/// Marks a batch invalid: its jobs are skipped (acknowledged without running) and it fires no
/// more callbacks. False when it does not exist.
pub fn invalidate(conn: &mut SyncConn, bid: &str) -> Result<bool> {
    let key = conn.keys().batch(bid);
    let cmd = redis::cmd("EVAL")
        .arg("if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end redis.call('HSET', KEYS[1], 'invalid', 1) return 1")
        .arg(1)
        .arg(&key)
        .clone();
    Ok(conn.cmd::<i64>(&cmd)? == 1)
}

/// Whether batch `bid` is valid: not invalidated (a batch whose data expired stays valid, so its
/// late jobs still run).
pub fn valid(conn: &mut SyncConn, bid: &str) -> Result<bool> {
    let key = conn.keys().batch(bid);
    let invalid: i64 = conn.cmd(redis::cmd("HEXISTS").arg(&key).arg("invalid"))?;
    Ok(invalid == 0)
}
