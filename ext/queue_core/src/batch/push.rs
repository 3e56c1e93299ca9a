//! Pushes into a batch: the jobs (already carrying `"bid"`) and the batch's `pending`/`total`
//! counts go in one `MULTI`, so no crash can leave a job queued but uncounted (its ack would then
//! complete the batch early) or counted but never queued.

use crate::client::{new_job, push_pipeline, schedule_cmd};
use crate::error::Result;
use crate::keys::Keys;
use crate::link::blocking::SyncConn;

fn count(pipe: &mut redis::Pipeline, keys: &Keys, bid: &str, n: usize) {
    let key = keys.batch(bid);
    for field in ["pending", "unsettled", "total"] {
        pipe.cmd("HINCRBY").arg(&key).arg(field).arg(n).ignore();
    }
}

/// Queues `jobs` on `queue` and counts them in batch `bid`, atomically.
pub fn push_sync(conn: &mut SyncConn, bid: &str, queue: &str, jobs: &[Vec<u8>]) -> Result<()> {
    if jobs.is_empty() {
        return Ok(());
    }
    let mut pipe = push_pipeline(conn.keys(), queue, jobs)?;
    pipe.atomic();
    count(&mut pipe, conn.keys(), bid, jobs.len());
    conn.pipe(&pipe)
}

/// Schedules `jobs` (run-at, JSON) and counts them in batch `bid`, atomically.
pub fn schedule_sync(conn: &mut SyncConn, bid: &str, jobs: &[(f64, Vec<u8>)]) -> Result<()> {
    if jobs.is_empty() {
        return Ok(());
    }
    let mut pipe = redis::pipe();
    pipe.atomic();
    pipe.add_command(schedule_cmd(conn.keys(), jobs)?).ignore();
    count(&mut pipe, conn.keys(), bid, jobs.len());
    conn.pipe(&pipe)
}

/// Adds `n` (may be negative) to the batch's counts: the deduplicating push path counts its jobs
/// before pushing them and takes the dropped ones back after.
pub fn adjust_sync(conn: &mut SyncConn, bid: &str, n: i64) -> Result<()> {
    let mut pipe = redis::pipe();
    pipe.atomic();
    let key = conn.keys().batch(bid);
    for field in ["pending", "unsettled", "total"] {
        pipe.cmd("HINCRBY").arg(&key).arg(field).arg(n).ignore();
    }
    conn.pipe(&pipe)
}

/// `perform_async` / `perform_bulk`'s common case inside a batch: each job built from the worker's
/// template (`prefix`, see [`crate::client::new_job`]) with the batch's `"bid"` added, then queued
/// and counted as [`push_sync`] does. Returns the jids, in order. `bid` must need no JSON escaping
/// (the binding checks).
pub fn push_new_sync<A: AsRef<[u8]>>(
    conn: &mut SyncConn,
    bid: &str,
    queue: &str,
    prefix: &[u8],
    args_jsons: &[A],
) -> Result<Vec<String>> {
    let mut with_bid = Vec::with_capacity(prefix.len() + bid.len() + 10);
    with_bid.extend_from_slice(prefix);
    with_bid.extend_from_slice(b",\"bid\":\"");
    with_bid.extend_from_slice(bid.as_bytes());
    with_bid.push(b'"');
    let now = crate::clock::now_f64();
    let (jids, jsons): (Vec<String>, Vec<Vec<u8>>) = args_jsons
        .iter()
        .map(|args| new_job(&with_bid, args.as_ref(), now))
        .collect::<Result<Vec<_>>>()?
        .into_iter()
        .unzip();
    push_sync(conn, bid, queue, &jsons)?;
    Ok(jids)
}
