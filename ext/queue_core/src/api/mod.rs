//! The read and admin side: what the Ruby inspection API (`JobQueue::Queue`, `RetrySet`, …), the CLI
//! and the dashboard ask of the data in Redis, and the operator's actions on it.
//!
//! One file per concern: [`stats`] (totals, daily history, reset), [`queues`] (lists),
//! [`sets`] (the `schedule`, `retry` and `dead` sorted sets), [`processes`] (process set, busy work,
//! signals), [`dedup`] (the idempotency keys held, a `SCAN` step at a time). Every call costs Redis
//! work bounded by what it returns (a page, a scan step, a window of a filter) or by the number of
//! queues or processes — never by the number of jobs, except the bulk actions (`retry_all`, `clear`)
//! whose point is to touch every job, and which do so in bounded steps.

pub mod dedup;
pub mod processes;
pub mod queues;
pub mod sets;
pub mod stats;

pub use stats::{ping, ping_cmd, queue_size, stats, Stats};

/// A window scanned by a filter: the entries it matched, and where the next window starts (`None`
/// once the end of the list or set was reached).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Filtered {
    /// `(member, score)` for a sorted set; `(job, index)` for a queue.
    pub entries: Vec<(Vec<u8>, f64)>,
    pub next: Option<i64>,
}

/// The window of a list (`kind` "list") or sorted set ("zset") at `key` that `filter.lua` searches:
/// at most `window` entries from `start`, at most `limit` matches of `needle`.
pub(crate) struct FilterCall<'a> {
    pub key: String,
    pub kind: &'static str,
    pub needle: &'a str,
    pub start: usize,
    pub window: usize,
    pub limit: usize,
}

impl FilterCall<'_> {
    /// One script call.
    pub(crate) async fn run(
        self,
        conn: &mut crate::link::connection::Conn,
    ) -> crate::error::Result<Filtered> {
        queues::check_window(self.window)?;
        let mut inv = crate::scripts::FILTER.prepare_invoke();
        inv.key(self.key)
            .arg(self.kind)
            .arg(self.start)
            .arg(self.window)
            .arg(self.needle)
            .arg(self.limit.max(1));
        let reply: Vec<redis::Value> = conn.script(&inv).await?;
        Ok(filtered_from(reply))
    }
}

/// Parses the reply of `filter.lua`: `[next_start, member, score, member, score, …]`.
fn filtered_from(reply: Vec<redis::Value>) -> Filtered {
    let mut items = reply.into_iter();
    let next = items.next().map(|v| stats::as_int(&v)).filter(|n| *n >= 0);
    let mut entries = Vec::new();
    while let (Some(member), Some(score)) = (items.next(), items.next()) {
        let member = match member {
            redis::Value::BulkString(b) => b,
            _ => continue,
        };
        entries.push((member, as_float(&score)));
    }
    Filtered { entries, next }
}

pub(crate) fn as_float(v: &redis::Value) -> f64 {
    match v {
        redis::Value::Int(i) => *i as f64,
        redis::Value::Double(d) => *d,
        redis::Value::BulkString(b) => std::str::from_utf8(b)
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(0.0),
        _ => 0.0,
    }
}
