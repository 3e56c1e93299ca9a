//! Queues (`queue:<name>` lists) as `Sidekiq::Queue` shows them: names, pages by index, latency, a
//! bounded search, deleting one job, clearing. Index 0 is the newest job (clients `LPUSH`), as in
//! Sidekiq's `Queue#each`.

use super::{FilterCall, Filtered};
use crate::clock::now_f64;
use crate::error::{Error, Result};
use crate::link::connection::Conn;

/// Most entries one filter call reads.
pub const MAX_WINDOW: usize = 10_000;
/// Most entries one page returns.
pub const MAX_PAGE: usize = 1_000;

/// Every known queue name, sorted (`SMEMBERS queues`: costs the number of queues).
pub async fn names(conn: &mut Conn) -> Result<Vec<String>> {
    let key = conn.keys().queues();
    let mut names: Vec<String> = conn.cmd(redis::cmd("SMEMBERS").arg(key)).await?;
    names.sort();
    Ok(names)
}

/// Up to `count` jobs from index `offset` (newest first), one `LRANGE`.
pub async fn page(
    conn: &mut Conn,
    queue: &str,
    offset: usize,
    count: usize,
) -> Result<Vec<Vec<u8>>> {
    check_page(count)?;
    if count == 0 {
        return Ok(Vec::new());
    }
    let key = conn.keys().queue(queue);
    conn.cmd(
        redis::cmd("LRANGE")
            .arg(key)
            .arg(offset)
            .arg(offset + count - 1),
    )
    .await
}

/// Seconds the oldest job has waited (0 for an empty queue), one `LINDEX`.
pub async fn latency(conn: &mut Conn, queue: &str) -> Result<f64> {
    let key = conn.keys().queue(queue);
    let oldest: Option<Vec<u8>> = conn.cmd(redis::cmd("LINDEX").arg(key).arg(-1)).await?;
    Ok(oldest.map_or(0.0, |job| super::stats::latency_of(&job, now_f64())))
}

/// The jobs containing `needle` among at most `window` jobs from index `start`, at most `limit`
/// of them, with their indexes; one script call.
pub async fn filter(
    conn: &mut Conn,
    queue: &str,
    needle: &str,
    start: usize,
    window: usize,
    limit: usize,
) -> Result<Filtered> {
    let key = conn.keys().queue(queue);
    let call = FilterCall {
        key,
        kind: "list",
        needle,
        start,
        window,
        limit,
    };
    call.run(conn).await
}

/// Removes one copy of exactly this job (`LREM 1`). Whether it was there.
pub async fn delete(conn: &mut Conn, queue: &str, job: &[u8]) -> Result<bool> {
    let key = conn.keys().queue(queue);
    let removed: i64 = conn
        .cmd(redis::cmd("LREM").arg(key).arg(1).arg(job))
        .await?;
    Ok(removed > 0)
}

/// Drops the queue and its name from `queues`, atomically (as Sidekiq's `Queue#clear`).
pub async fn clear(conn: &mut Conn, queue: &str) -> Result<()> {
    let keys = conn.keys().clone();
    let mut pipe = redis::pipe();
    pipe.atomic()
        .cmd("UNLINK")
        .arg(keys.queue(queue))
        .ignore()
        .cmd("SREM")
        .arg(keys.queues())
        .arg(queue)
        .ignore();
    conn.pipe::<()>(&pipe).await
}

pub(crate) fn check_page(count: usize) -> Result<()> {
    if count > MAX_PAGE {
        return Err(Error::InvalidArgument(format!(
            "a page holds at most {MAX_PAGE} entries, {count} asked"
        )));
    }
    Ok(())
}

pub(crate) fn check_window(window: usize) -> Result<()> {
    if window == 0 || window > MAX_WINDOW {
        return Err(Error::InvalidArgument(format!(
            "a filter reads 1..{MAX_WINDOW} entries per call, {window} asked"
        )));
    }
    Ok(())
}
