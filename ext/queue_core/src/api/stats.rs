//! Totals, as `Sidekiq::Stats` reports them, the daily history (`stat:processed:<date>`) and reset.

use crate::clock::now_f64;
use crate::error::{Error, Result};
use crate::job::Job;
use crate::link::connection::Conn;

/// Totals, as `Sidekiq::Stats` reports them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Stats {
    pub processed: i64,
    pub failed: i64,
    /// Jobs dropped unrun because their `expires_in` ran out (`jq:stat:expired`; not Sidekiq's).
    pub expired: i64,
    pub scheduled_size: i64,
    pub retry_size: i64,
    pub dead_size: i64,
    pub processes_size: i64,
    /// Jobs being run now: the `busy` counts of every process.
    pub workers_size: i64,
    /// Jobs waiting in all queues.
    pub enqueued: i64,
    /// Seconds the oldest job of the `default` queue has waited (0 when it is empty).
    pub default_queue_latency: f64,
    /// Each known queue and its length, in name order.
    pub queues: Vec<(String, i64)>,
}

/// Two round trips, whatever the number of jobs: the queue and process names, then one pipeline of
/// counters, set sizes, `LLEN` per queue and `HGET busy` per process.
pub async fn stats(conn: &mut Conn) -> Result<Stats> {
    let keys = conn.keys().clone();
    let mut names_pipe = redis::pipe();
    names_pipe.cmd("SMEMBERS").arg(keys.queues());
    names_pipe.cmd("SMEMBERS").arg(keys.processes());
    let (mut names, processes): (Vec<String>, Vec<String>) = conn.pipe(&names_pipe).await?;
    names.sort();
    let mut pipe = redis::pipe();
    pipe.cmd("GET").arg(keys.stat_processed());
    pipe.cmd("GET").arg(keys.stat_failed());
    pipe.cmd("ZCARD").arg(keys.schedule());
    pipe.cmd("ZCARD").arg(keys.retry());
    pipe.cmd("ZCARD").arg(keys.dead());
    pipe.cmd("SCARD").arg(keys.processes());
    pipe.cmd("LINDEX").arg(keys.queue("default")).arg(-1);
    for name in &names {
        pipe.cmd("LLEN").arg(keys.queue(name));
    }
    for identity in &processes {
        pipe.cmd("HGET").arg(keys.process(identity)).arg("busy");
    }
    pipe.cmd("GET").arg(keys.stat_expired());
    let replies: Vec<redis::Value> = conn.pipe(&pipe).await?;
    let ints: Vec<i64> = replies.iter().map(as_int).collect();
    let at = |i: usize| ints.get(i).copied().unwrap_or(0);
    let oldest = match replies.get(6) {
        Some(redis::Value::BulkString(b)) => Some(b.as_slice()),
        _ => None,
    };
    let lengths = ints.get(7..7 + names.len()).unwrap_or_default().to_vec();
    let workers_size = ints
        .get(7 + names.len()..7 + names.len() + processes.len())
        .unwrap_or_default()
        .iter()
        .sum();
    let queues: Vec<(String, i64)> = names.into_iter().zip(lengths).collect();
    Ok(Stats {
        processed: at(0),
        failed: at(1),
        expired: ints.last().copied().unwrap_or(0),
        scheduled_size: at(2),
        retry_size: at(3),
        dead_size: at(4),
        processes_size: at(5),
        workers_size,
        enqueued: queues.iter().map(|(_, n)| n).sum(),
        default_queue_latency: oldest.map_or(0.0, |job| latency_of(job, now_f64())),
        queues,
    })
}

/// Seconds since a queued job's `enqueued_at`, float seconds or Sidekiq 8's integer milliseconds
/// (0 for a job without one or that does not parse, as Sidekiq's `thence = job["enqueued_at"] || now`).
pub fn latency_of(job: &[u8], now: f64) -> f64 {
    Job::parse(job)
        .ok()
        .and_then(|j| j.time("enqueued_at"))
        .map_or(0.0, |at| now - at)
}

pub(crate) fn as_int(v: &redis::Value) -> i64 {
    match v {
        redis::Value::Int(i) => *i,
        redis::Value::BulkString(b) => std::str::from_utf8(b)
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(0),
        _ => 0,
    }
}

/// One of the two counters Sidekiq keeps in total and per day.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Counter {
    Processed,
    Failed,
}

impl Counter {
    pub fn parse(name: &str) -> Result<Counter> {
        match name {
            "processed" => Ok(Counter::Processed),
            "failed" => Ok(Counter::Failed),
            other => Err(Error::InvalidArgument(format!(
                "unknown stat {other:?}; use processed or failed"
            ))),
        }
    }
}

/// The daily counts of `counter` on each of `dates` (`YYYY-MM-DD`, UTC), one `MGET`.
pub async fn history(conn: &mut Conn, counter: Counter, dates: &[String]) -> Result<Vec<i64>> {
    if dates.is_empty() {
        return Ok(Vec::new());
    }
    for date in dates {
        if !is_date(date) {
            return Err(Error::InvalidArgument(format!(
                "{date:?} is not a YYYY-MM-DD date"
            )));
        }
    }
    let keys = conn.keys().clone();
    let mut cmd = redis::cmd("MGET");
    for date in dates {
        cmd.arg(match counter {
            Counter::Processed => keys.stat_processed_on(date),
            Counter::Failed => keys.stat_failed_on(date),
        });
    }
    let values: Vec<Option<i64>> = conn.cmd(&cmd).await?;
    Ok(values.into_iter().map(|v| v.unwrap_or(0)).collect())
}

fn is_date(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 10
        && b[4] == b'-'
        && b[7] == b'-'
        && b.iter()
            .enumerate()
            .all(|(i, c)| i == 4 || i == 7 || c.is_ascii_digit())
}

/// Sets the total counters named to 0 (Sidekiq's `Stats#reset`; the daily keys stay), one `MSET`.
pub async fn reset(conn: &mut Conn, counters: &[Counter]) -> Result<()> {
    if counters.is_empty() {
        return Ok(());
    }
    let keys = conn.keys().clone();
    let mut cmd = redis::cmd("MSET");
    for counter in counters {
        let key = match counter {
            Counter::Processed => keys.stat_processed(),
            Counter::Failed => keys.stat_failed(),
        };
        cmd.arg(key).arg(0);
    }
    conn.cmd::<()>(&cmd).await
}

/// Length of one queue.
pub async fn queue_size(conn: &mut Conn, queue: &str) -> Result<i64> {
    let key = conn.keys().queue(queue);
    conn.cmd(redis::cmd("LLEN").arg(key)).await
}

pub fn ping_cmd() -> redis::Cmd {
    redis::cmd("PING")
}

/// One round trip; fails with [`crate::Error::Connection`] if Redis cannot be reached.
pub async fn ping(conn: &mut Conn) -> Result<bool> {
    conn.cmd::<String>(&ping_cmd()).await.map(|_| true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latency_follows_enqueued_at() {
        assert_eq!(latency_of(br#"{"enqueued_at":100.5}"#, 110.0), 9.5);
        // Sidekiq 8: integer epoch milliseconds.
        assert_eq!(
            latency_of(br#"{"enqueued_at":1763985600500}"#, 1763985610.0),
            9.5
        );
        assert_eq!(latency_of(br#"{"class":"W"}"#, 110.0), 0.0);
        assert_eq!(latency_of(b"{oops", 110.0), 0.0);
    }

    #[test]
    fn dates_are_checked() {
        assert!(is_date("2026-01-02"));
        assert!(!is_date("2026-1-02"));
        assert!(!is_date("2026/01/02"));
        assert!(Counter::parse("processed").is_ok());
        assert!(Counter::parse("busy").is_err());
    }
}
