//! The morgue and the dashboard's actions (`ordered_admin.lua`, atomic per call of up to [`CHUNK`]
//! ids; the "all" actions walk their index a chunk at a time, never with `KEYS`/`SCAN`).
//!
//! - [`list`]: morgue entries sorted by id or by `updated_at`, a page at a time;
//! - [`requeue`] (Lowkiq's `morgue_queue_up`): back to the queue, merged by the morgue + queued rule
//!   (payloads union, `perform_in = now`, `retry_count = -1`); [`delete`] (`morgue_delete`);
//!   [`requeue_all`], [`delete_all`] (`morgue_queue_up_all_jobs`, `morgue_delete_all_jobs`);
//! - [`perform_all_jobs_now`]: every queued id due now (Lowkiq writes 0; we write the Redis server's
//!   now, so the lag shown afterwards is real, not 56 years);
//! - [`kill_all_failed_jobs`]: queued ids that have failed (`retry_count >= 0`) go to the morgue whole;
//! - [`delete_all_failed_jobs`]: those are deleted.
//!
//! Ids in processing are left alone by all of them: they belong to the running worker.

use redis::Value;

use crate::error::Result;
use crate::link::blocking::SyncConn;

use super::{reply_array, reply_f64, reply_payloads, reply_string, OrderedQueue, Payload};

/// Ids per admin script call.
pub const CHUNK: usize = 500;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MorgueOrder {
    Id,
    UpdatedAt,
}

/// One morgue entry.
#[derive(Debug, Clone, PartialEq)]
pub struct MorgueJob {
    pub id: String,
    pub updated_at: Option<f64>,
    pub error: Option<String>,
    /// Oldest first.
    pub payloads: Vec<Payload>,
}

/// A page of the morgue: `limit` entries from `offset`, ascending (or `descending`) by `order`.
/// Two round trips: the ids, then one pipeline reading every entry.
pub fn list(
    conn: &mut SyncConn,
    queue: &OrderedQueue,
    order: MorgueOrder,
    descending: bool,
    offset: usize,
    limit: usize,
) -> Result<Vec<MorgueJob>> {
    if limit == 0 {
        return Ok(Vec::new());
    }
    let keys = queue.keys();
    let index = match order {
        MorgueOrder::Id => keys.morgue_all_ids_lex(),
        MorgueOrder::UpdatedAt => keys.morgue_all_ids_scored_by_updated_at(),
    };
    let mut range = redis::cmd(if descending { "ZREVRANGE" } else { "ZRANGE" });
    range.arg(&index).arg(offset).arg(offset + limit - 1);
    let ids: Vec<String> = conn.cmd(&range)?;
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let mut pipe = redis::pipe();
    for id in &ids {
        pipe.cmd("ZSCORE")
            .arg(keys.morgue_all_ids_scored_by_updated_at())
            .arg(id);
        pipe.cmd("HGET").arg(keys.morgue_errors()).arg(id);
        pipe.cmd("ZRANGE")
            .arg(keys.morgue_payloads(id))
            .arg(0)
            .arg(-1)
            .arg("WITHSCORES");
    }
    let replies: Vec<Value> = conn.pipe(&pipe)?;
    let mut it = replies.into_iter();
    let mut out = Vec::with_capacity(ids.len());
    for id in ids {
        let (Some(at), Some(err), Some(payloads)) = (it.next(), it.next(), it.next()) else {
            return Err(crate::Error::redis("morgue listing: short pipeline reply"));
        };
        out.push(MorgueJob {
            id,
            updated_at: match at {
                Value::Nil => None,
                v => Some(reply_f64(v, "updated_at")?),
            },
            error: match err {
                Value::Nil => None,
                v => Some(reply_string(v, "morgue error")?),
            },
            payloads: match payloads {
                // RESP3 servers answer WITHSCORES with pairs; flatten them.
                Value::Array(items) if items.iter().all(|i| matches!(i, Value::Array(_))) => {
                    let mut flat = Vec::new();
                    for pair in items {
                        flat.extend(reply_array(pair, "payload pair")?);
                    }
                    reply_payloads(Value::Array(flat), "morgue payloads")?
                }
                v => reply_payloads(v, "morgue payloads")?,
            },
        });
    }
    Ok(out)
}

fn admin(conn: &mut SyncConn, queue: &OrderedQueue, action: &str, ids: &[String]) -> Result<u64> {
    let mut changed = 0;
    for chunk in ids.chunks(CHUNK) {
        let mut inv = super::scripts::ADMIN.prepare_invoke();
        inv.arg(queue.keys().prefix()).arg(action);
        for id in chunk {
            inv.arg(id).arg(queue.shard_of(id));
        }
        let n: i64 = conn.script(&inv)?;
        changed += n.max(0) as u64;
    }
    Ok(changed)
}

/// Applies `action` to ids read from `index` a chunk at a time until a chunk changes nothing.
fn admin_all(
    conn: &mut SyncConn,
    queue: &OrderedQueue,
    action: &str,
    index: &redis::Cmd,
) -> Result<u64> {
    let mut changed = 0;
    loop {
        let ids: Vec<String> = conn.cmd(index)?;
        if ids.is_empty() {
            return Ok(changed);
        }
        let n = admin(conn, queue, action, &ids)?;
        if n == 0 {
            // What is left does not qualify (due by a clock that differs slightly from the server's).
            return Ok(changed);
        }
        changed += n;
    }
}

/// Moves morgue entries back to the queue. Returns how many were in the morgue.
pub fn requeue(conn: &mut SyncConn, queue: &OrderedQueue, ids: &[String]) -> Result<u64> {
    admin(conn, queue, "requeue", ids)
}

/// Deletes morgue entries. Returns how many were in the morgue.
pub fn delete(conn: &mut SyncConn, queue: &OrderedQueue, ids: &[String]) -> Result<u64> {
    admin(conn, queue, "delete", ids)
}

fn first_chunk(key: String) -> redis::Cmd {
    let mut c = redis::cmd("ZRANGE");
    c.arg(key).arg(0).arg(CHUNK - 1);
    c
}

pub fn requeue_all(conn: &mut SyncConn, queue: &OrderedQueue) -> Result<u64> {
    admin_all(
        conn,
        queue,
        "requeue",
        &first_chunk(queue.keys().morgue_all_ids_lex()),
    )
}

pub fn delete_all(conn: &mut SyncConn, queue: &OrderedQueue) -> Result<u64> {
    admin_all(
        conn,
        queue,
        "delete",
        &first_chunk(queue.keys().morgue_all_ids_lex()),
    )
}

/// Makes every queued id due now. Returns how many were due later.
pub fn perform_all_jobs_now(conn: &mut SyncConn, queue: &OrderedQueue) -> Result<u64> {
    // The ids due later than this client's now; the script re-checks with the server's clock.
    let mut index = redis::cmd("ZRANGEBYSCORE");
    index
        .arg(queue.keys().all_ids_scored_by_perform_in())
        .arg(format!("({}", crate::clock::now_f64()))
        .arg("+inf")
        .arg("LIMIT")
        .arg(0)
        .arg(CHUNK);
    admin_all(conn, queue, "now", &index)
}

fn failed_index(queue: &OrderedQueue) -> redis::Cmd {
    let mut index = redis::cmd("ZRANGEBYSCORE");
    index
        .arg(queue.keys().all_ids_scored_by_retry_count())
        .arg(0)
        .arg("+inf")
        .arg("LIMIT")
        .arg(0)
        .arg(CHUNK);
    index
}

/// Moves every queued id that has failed at least once (`retry_count >= 0`) to the morgue, all its
/// payloads and its last error. Returns how many.
pub fn kill_all_failed_jobs(conn: &mut SyncConn, queue: &OrderedQueue) -> Result<u64> {
    admin_all(conn, queue, "kill", &failed_index(queue))
}

/// Deletes every queued id that has failed at least once. Returns how many.
pub fn delete_all_failed_jobs(conn: &mut SyncConn, queue: &OrderedQueue) -> Result<u64> {
    admin_all(conn, queue, "drop", &failed_index(queue))
}
