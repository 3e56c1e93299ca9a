//! Processes as `Sidekiq::ProcessSet` and `Sidekiq::Workers` show them: each live process's hash, the
//! jobs it is running, pruning of entries whose hash expired, and signals (`quiet!`, `stop!`). Every
//! call costs the number of processes, never the number of jobs.

use crate::error::{Error, Result};
use crate::link::connection::Conn;

/// One entry of the `processes` set, read from its hash.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProcessRow {
    pub identity: String,
    /// The `info` JSON the process wrote (`None`: the hash has expired).
    pub info: Option<String>,
    pub busy: i64,
    pub beat: f64,
    pub quiet: Option<String>,
    pub rss: i64,
    pub rtt_us: i64,
}

/// The signals a dashboard may send, as Sidekiq names them.
pub const SIGNALS: [&str; 3] = ["TSTP", "TERM", "TTIN"];

async fn identities(conn: &mut Conn) -> Result<Vec<String>> {
    let key = conn.keys().processes();
    let mut ids: Vec<String> = conn.cmd(redis::cmd("SMEMBERS").arg(key)).await?;
    ids.sort();
    Ok(ids)
}

/// Every process in the set, in identity order; two round trips.
pub async fn list(conn: &mut Conn) -> Result<Vec<ProcessRow>> {
    let ids = identities(conn).await?;
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let keys = conn.keys().clone();
    let mut pipe = redis::pipe();
    for id in &ids {
        pipe.cmd("HMGET")
            .arg(keys.process(id))
            .arg(&["info", "busy", "beat", "quiet", "rss", "rtt_us"]);
    }
    type Fields = (
        Option<String>,
        Option<String>,
        Option<String>,
        Option<String>,
        Option<String>,
        Option<String>,
    );
    let rows: Vec<Fields> = conn.pipe(&pipe).await?;
    let int = |s: &Option<String>| s.as_deref().and_then(|s| s.parse().ok()).unwrap_or(0);
    Ok(ids
        .into_iter()
        .zip(rows)
        .map(
            |(identity, (info, busy, beat, quiet, rss, rtt))| ProcessRow {
                identity,
                info,
                busy: int(&busy),
                beat: beat.as_deref().and_then(|s| s.parse().ok()).unwrap_or(0.0),
                quiet,
                rss: int(&rss),
                rtt_us: int(&rtt),
            },
        )
        .collect())
}

/// Removes from `processes` the identities whose hash has expired (Sidekiq's `ProcessSet#cleanup`).
/// Returns how many it removed.
pub async fn cleanup(conn: &mut Conn) -> Result<i64> {
    let gone: Vec<String> = list(conn)
        .await?
        .into_iter()
        .filter(|p| p.info.is_none())
        .map(|p| p.identity)
        .collect();
    if gone.is_empty() {
        return Ok(0);
    }
    let key = conn.keys().processes();
    conn.cmd(redis::cmd("SREM").arg(key).arg(&gone)).await
}

/// Queues a signal for one process (`LPUSH <identity>-signals`, expiring in 60 s), as Sidekiq's
/// dashboard does; the process reads it on its next beat.
pub async fn signal(conn: &mut Conn, identity: &str, signal: &str) -> Result<()> {
    if !SIGNALS.contains(&signal) {
        return Err(Error::InvalidArgument(format!(
            "unknown signal {signal:?}; use one of {SIGNALS:?}"
        )));
    }
    let key = conn.keys().signals(identity);
    let mut pipe = redis::pipe();
    pipe.atomic()
        .cmd("LPUSH")
        .arg(&key)
        .arg(signal)
        .ignore()
        .cmd("EXPIRE")
        .arg(&key)
        .arg(60)
        .ignore();
    conn.pipe::<()>(&pipe).await
}

/// The jobs running now: `(identity, thread id, work JSON)` for each live process's busy threads
/// (`<identity>:workers`, as Sidekiq 6.4 reads it); two round trips.
pub async fn work(conn: &mut Conn) -> Result<Vec<(String, String, String)>> {
    let ids = identities(conn).await?;
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let keys = conn.keys().clone();
    let mut pipe = redis::pipe();
    for id in &ids {
        pipe.cmd("EXISTS").arg(keys.process(id));
        pipe.cmd("HGETALL").arg(keys.workers(id));
    }
    let replies: Vec<redis::Value> = conn.pipe(&pipe).await?;
    let mut out = Vec::new();
    for (id, pair) in ids.iter().zip(replies.chunks(2)) {
        let [exists, threads] = pair else { continue };
        if super::stats::as_int(exists) == 0 {
            continue;
        }
        out.extend(
            string_pairs(threads)
                .into_iter()
                .map(|(tid, json)| (id.clone(), tid, json)),
        );
    }
    Ok(out)
}

/// An `HGETALL` reply (a RESP2 flat array or a RESP3 map) as field/value pairs.
fn string_pairs(v: &redis::Value) -> Vec<(String, String)> {
    let text = |v: &redis::Value| match v {
        redis::Value::BulkString(b) => Some(String::from_utf8_lossy(b).into_owned()),
        redis::Value::SimpleString(s) => Some(s.clone()),
        _ => None,
    };
    match v {
        redis::Value::Array(items) => items
            .chunks(2)
            .filter_map(|p| Some((text(p.first()?)?, text(p.get(1)?)?)))
            .collect(),
        redis::Value::Map(items) => items
            .iter()
            .filter_map(|(k, v)| Some((text(k)?, text(v)?)))
            .collect(),
        _ => Vec::new(),
    }
}
