//! One scrape's figures, read from Redis in at most four pipelined round trips:
//! 1. queue, paused queue and process names, the counters hash, the `schedule`/`retry`/`dead` sizes,
//!    the concurrency limits (`limits`; their running and deferred counts in one more pipeline, only
//!    when some worker has a limit);
//! 2. per queue `LLEN` and its oldest job (`LINDEX -1`, for the latency), per process `HGET busy`;
//! 3. per ordered worker, its length, morgue size and lag (`ordered::stats`), only if there are any.
//!
//! Redis work is O(queues + processes + ordered workers + counted series); no list or set is read
//! beyond one element, so a million queued jobs cost what ten do.

use std::collections::BTreeMap;

use crate::api::stats::{as_int, latency_of};
use crate::clock::now_f64;
use crate::error::Result;
use crate::link::blocking::SyncConn;
use crate::ordered::stats::{queue_stats, QueueStats};
use crate::ordered::OrderedQueue;

use super::field::{self, Kind};
use super::tally::BUCKETS;

/// An ordered worker to report: its name (the `worker` label) and its queue.
#[derive(Debug, Clone)]
pub struct OrderedWorker {
    pub name: String,
    pub queue: OrderedQueue,
}

/// Cluster-wide counts of one class on one queue.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Counted {
    pub processed: u64,
    pub failed: u64,
    pub dropped: u64,
    pub expired: u64,
    pub sum: f64,
    /// `(upper bound, jobs in that bucket alone)`, by bound; `+Inf` last when present.
    pub buckets: Vec<(f64, u64)>,
}

impl Counted {
    /// Jobs observed by the histogram.
    pub fn count(&self) -> u64 {
        self.buckets.iter().map(|(_, n)| n).sum()
    }
}

/// One queue's gauges.
#[derive(Debug, Clone, PartialEq)]
pub struct QueueGauge {
    pub name: String,
    pub size: i64,
    /// Seconds the oldest job has waited (0 when empty).
    pub latency: f64,
    /// Paused (`pause.rs`): no process fetches from it.
    pub paused: bool,
}

/// Everything one scrape reports.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Snapshot {
    /// By `(queue, class)`.
    pub counted: BTreeMap<(String, String), Counted>,
    /// By queue name.
    pub queues: Vec<QueueGauge>,
    pub scheduled: i64,
    pub retry: i64,
    pub dead: i64,
    /// Processes whose Sidekiq process hash is alive.
    pub processes: i64,
    /// Jobs running now, over those processes.
    pub busy: i64,
    pub ordered: Vec<(String, QueueStats)>,
    /// Concurrency limits per worker class (`limits`): limit, running, deferred.
    pub limits: Vec<crate::limits::ClassStats>,
}

/// Reads one snapshot.
pub fn scrape(conn: &mut SyncConn, ordered: &[OrderedWorker]) -> Result<Snapshot> {
    let keys = conn.keys().clone();
    let mut first = redis::pipe();
    first.cmd("SMEMBERS").arg(keys.queues());
    first.cmd("SMEMBERS").arg(keys.processes());
    first.cmd("HGETALL").arg(keys.metrics());
    first.cmd("ZCARD").arg(keys.schedule());
    first.cmd("ZCARD").arg(keys.retry());
    first.cmd("ZCARD").arg(keys.dead());
    first.cmd("SMEMBERS").arg(keys.paused());
    first.cmd("HGETALL").arg(keys.limits());
    type Counts = Vec<(String, i64)>;
    type First = (
        Vec<String>,
        Vec<String>,
        Vec<(String, String)>,
        i64,
        i64,
        i64,
        Vec<String>,
        Counts,
    );
    let (mut names, processes, fields, scheduled, retry, dead, paused, caps): First =
        conn.pipe(&first)?;
    // A paused queue is reported even before its first push.
    names.extend(paused.iter().cloned());
    names.sort();
    names.dedup();

    let mut second = redis::pipe();
    for name in &names {
        second.cmd("LLEN").arg(keys.queue(name));
        second.cmd("LINDEX").arg(keys.queue(name)).arg(-1);
    }
    for identity in &processes {
        second.cmd("HGET").arg(keys.process(identity)).arg("busy");
    }
    let replies: Vec<redis::Value> = if names.is_empty() && processes.is_empty() {
        Vec::new()
    } else {
        conn.pipe(&second)?
    };
    let now = now_f64();
    let queues = names
        .into_iter()
        .enumerate()
        .map(|(i, name)| {
            let size = replies.get(2 * i).map_or(0, as_int);
            let latency = match replies.get(2 * i + 1) {
                Some(redis::Value::BulkString(job)) => latency_of(job, now).max(0.0),
                _ => 0.0,
            };
            QueueGauge {
                paused: paused.contains(&name),
                name,
                size,
                latency,
            }
        })
        .collect::<Vec<_>>();
    let busy_replies = replies.get(2 * queues.len()..).unwrap_or_default();
    let alive = busy_replies
        .iter()
        .filter(|v| !matches!(v, redis::Value::Nil))
        .count() as i64;
    let busy = busy_replies.iter().map(as_int).sum();

    let ordered = if ordered.is_empty() {
        Vec::new()
    } else {
        let stats = queue_stats(conn, ordered.iter().map(|w| &w.queue))?;
        ordered.iter().map(|w| w.name.clone()).zip(stats).collect()
    };

    Ok(Snapshot {
        counted: counted(&fields),
        queues,
        scheduled,
        retry,
        dead,
        processes: alive,
        busy,
        ordered,
        limits: limit_stats(conn, caps)?,
    })
}

/// The concurrency limits' running and deferred counts (one more round trip), only when some worker
/// has a limit: an app without limits pays one `HGETALL` of an empty hash.
fn limit_stats(
    conn: &mut SyncConn,
    caps: Vec<(String, i64)>,
) -> Result<Vec<crate::limits::ClassStats>> {
    if caps.is_empty() {
        return Ok(Vec::new());
    }
    let keys = conn.keys().clone();
    let mut pipe = redis::pipe();
    pipe.cmd("HGETALL").arg(keys.limits_running());
    pipe.cmd("HGETALL").arg(keys.limits_deferred());
    let (running, deferred) = conn.pipe(&pipe)?;
    Ok(crate::limits::merge_stats(caps, running, deferred))
}

/// The counters hash, grouped by queue and class. Unknown fields are skipped.
pub fn counted(fields: &[(String, String)]) -> BTreeMap<(String, String), Counted> {
    let mut out: BTreeMap<(String, String), Counted> = BTreeMap::new();
    for (name, value) in fields {
        let Some((kind, queue, class)) = field::parse(name) else {
            continue;
        };
        let c = out.entry((queue.to_owned(), class.to_owned())).or_default();
        let int = || value.parse::<u64>().unwrap_or(0);
        match kind {
            Kind::Processed => c.processed += int(),
            Kind::Failed => c.failed += int(),
            Kind::Dropped => c.dropped += int(),
            Kind::Expired => c.expired += int(),
            Kind::Sum => c.sum += value.parse::<f64>().unwrap_or(0.0),
            Kind::Bucket(le) => c.buckets.push((le, int())),
        }
    }
    // Every series shows the standard bounds, counted or not, so its bucket set does not change
    // from one scrape to the next; bounds of another version stay too.
    for c in out.values_mut() {
        for le in BUCKETS.iter().copied().chain([f64::INFINITY]) {
            if !c.buckets.iter().any(|(b, _)| *b == le) {
                c.buckets.push((le, 0));
            }
        }
        c.buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_group_by_queue_and_class() {
        let f = |k, q, c, v: &str| (field::name(k, q, c), v.to_owned());
        let fields = vec![
            f(Kind::Processed, "default", "W", "3"),
            f(Kind::Failed, "default", "W", "1"),
            f(Kind::Bucket(f64::INFINITY), "default", "W", "1"),
            f(Kind::Bucket(0.01), "default", "W", "2"),
            f(Kind::Bucket(0.005), "default", "W", "1"),
            f(Kind::Sum, "default", "W", "12.5"),
            f(Kind::Dropped, "low", "W", "7"),
            ("garbage".to_owned(), "1".to_owned()),
        ];
        let c = counted(&fields);
        let w = &c[&("default".to_owned(), "W".to_owned())];
        assert_eq!((w.processed, w.failed, w.sum, w.count()), (3, 1, 12.5, 4));
        assert_eq!(w.buckets.len(), BUCKETS.len() + 1);
        assert_eq!(w.buckets[0], (0.005, 1));
        assert_eq!(w.buckets[1], (0.01, 2));
        assert_eq!(w.buckets[2], (0.025, 0));
        assert_eq!(w.buckets[BUCKETS.len()], (f64::INFINITY, 1));
        assert_eq!(c[&("low".to_owned(), "W".to_owned())].dropped, 7);
        assert_eq!(c.len(), 2);
    }
}
