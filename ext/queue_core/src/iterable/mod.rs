//! Iterable jobs' progress, kept in Sidekiq 7.3's `it-<jid>` hash so a job interrupted under one
//! server resumes under the other (`Sidekiq::Job::Iterable`, `lib/sidekiq/job/iterable.rb` at
//! v7.3.10, read for its layout).
//!
//! The hash's fields, all strings as Sidekiq writes them:
//! - `ex`: how many runs began (an integer);
//! - `c`: the cursor, as JSON;
//! - `rt`: seconds spent iterating (a Ruby Float's `to_s`);
//! - `cancelled`: the epoch second `cancel!` was first called.
//!
//! Every write renews a 30-day TTL (Sidekiq's `STATE_TTL`). A save is one `MULTI` of `HSET`,
//! `EXPIRE` and `HGET cancelled`, as Sidekiq's `flush_state`, so a run learns of a cancel in the same
//! round trip that records its progress. The Ruby side (`lib/queue/iterable/state.rb`) formats the
//! values; the engine only moves them.

use crate::error::Result;
use crate::link::connection::Conn;

/// Seconds the hash lives after its last write.
pub const STATE_TTL: u64 = 30 * 24 * 60 * 60;

/// What a run resumes from: the stored `ex`, `c` and `rt` fields, as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Progress {
    pub executions: Option<String>,
    pub cursor: Option<String>,
    pub runtime: Option<String>,
}

/// The saved progress of `jid`, or `None` when there is none (a first run, or a hash that holds only
/// `cancelled`).
pub async fn load(conn: &mut Conn, jid: &str) -> Result<Option<Progress>> {
    let key = conn.keys().iteration(jid);
    let fields: Vec<(String, String)> = conn.cmd(redis::cmd("HGETALL").arg(&key)).await?;
    let field = |name: &str| {
        fields
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
    };
    let progress = Progress {
        executions: field("ex"),
        cursor: field("c"),
        runtime: field("rt"),
    };
    if progress.executions.is_none() && progress.cursor.is_none() {
        return Ok(None);
    }
    Ok(Some(progress))
}

/// Writes `ex`, `c` and `rt`, renews the TTL, and returns the `cancelled` field (the epoch second
/// as stored), all in one `MULTI`.
pub async fn save(
    conn: &mut Conn,
    jid: &str,
    executions: &str,
    cursor: &str,
    runtime: &str,
) -> Result<Option<String>> {
    let key = conn.keys().iteration(jid);
    let mut pipe = redis::pipe();
    pipe.atomic()
        .cmd("HSET")
        .arg(&key)
        .arg("ex")
        .arg(executions)
        .arg("c")
        .arg(cursor)
        .arg("rt")
        .arg(runtime)
        .ignore()
        .cmd("EXPIRE")
        .arg(&key)
        .arg(STATE_TTL)
        .ignore()
        .cmd("HGET")
        .arg(&key)
        .arg("cancelled");
    let (cancelled,): (Option<String>,) = conn.pipe(&pipe).await?;
    Ok(cancelled)
}

/// Marks `jid` cancelled at `now` (epoch seconds) unless it already was, renews the TTL, and returns
/// the second it was first cancelled.
pub async fn cancel(conn: &mut Conn, jid: &str, now: i64) -> Result<i64> {
    let key = conn.keys().iteration(jid);
    let mut pipe = redis::pipe();
    pipe.cmd("HSETNX")
        .arg(&key)
        .arg("cancelled")
        .arg(now)
        .ignore()
        .cmd("HGET")
        .arg(&key)
        .arg("cancelled")
        .cmd("EXPIRE")
        .arg(&key)
        .arg(STATE_TTL)
        .ignore();
    let (cancelled,): (Option<String>,) = conn.pipe(&pipe).await?;
    Ok(cancelled.and_then(|s| s.trim().parse().ok()).unwrap_or(now))
}

/// The `cancelled` field of `jid`, as stored, or `None`.
pub async fn cancelled(conn: &mut Conn, jid: &str) -> Result<Option<String>> {
    let key = conn.keys().iteration(jid);
    conn.cmd(redis::cmd("HGET").arg(&key).arg("cancelled"))
        .await
}

/// Removes the hash (a finished or cancelled job's). Whether it was there.
pub async fn delete(conn: &mut Conn, jid: &str) -> Result<bool> {
    let key = conn.keys().iteration(jid);
    let removed: i64 = conn.cmd(redis::cmd("UNLINK").arg(&key)).await?;
    Ok(removed > 0)
}
