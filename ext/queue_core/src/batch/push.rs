//! Pushes into a batch: the jobs (already carrying `"bid"`) and the batch's `pending`/`total`
//! counts go in one `MULTI`, so no crash can leave a job queued but uncounted (its ack would then
//! complete the batch early) or counted but never queued.

use crate::client::{push_pipeline, schedule_cmd};
use crate::error::Result;
use crate::keys::Keys;
use crate::link::blocking::SyncConn;

fn count(pipe: &mut redis::Pipeline, keys: &Keys, bid: &str, n: usize) {
    let key = keys.batch(bid);
    pipe.cmd("HINCRBY").arg(&key).arg("pending").arg(n).ignore();
    pipe.cmd("HINCRBY").arg(&key).arg("total").arg(n).ignore();
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
    pipe.cmd("HINCRBY").arg(&key).arg("pending").arg(n).ignore();
    pipe.cmd("HINCRBY").arg(&key).arg("total").arg(n).ignore();
    conn.pipe(&pipe)
}
