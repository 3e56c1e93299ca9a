//! Lowkiq's dashboard numbers, in the shape of its `GET /api/v1/stats`:
//! `{"total":{"length","morgue_length","lag"},"by_worker":{Name:{"length","morgue_length","lag"}}}`.
//!
//! As Lowkiq counts them: `length` is the queued ids (fresh and retrying; ids in processing are not
//! queued), `morgue_length` the morgue's ids, and `lag` how late the oldest due id is: now (the Redis
//! server's clock) minus its `perform_in`, in seconds, 0 when nothing is due (and 1 for a `perform_in`
//! of 0, which Lowkiq's `perform_all_jobs_now` writes). The total sums lengths and takes the largest
//! lag. [`QueueStats`] also carries the dashboard's `processed`, `failed` and `busy` (ids in flight).
//! One pipelined round trip for any number of workers; no key is scanned.

use serde_json::{json, Map, Value};

use crate::error::Result;
use crate::link::blocking::SyncConn;

use super::OrderedQueue;

/// One worker's numbers.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct QueueStats {
    pub length: u64,
    pub morgue_length: u64,
    pub lag: f64,
    pub processed: u64,
    pub failed: u64,
    pub busy: u64,
}

/// Reads the numbers of `workers` (worker name, its queue) as the stats document.
pub fn stats(conn: &mut SyncConn, workers: &[(&str, &OrderedQueue)]) -> Result<Value> {
    let per = queue_stats(conn, workers.iter().map(|(_, q)| *q))?;
    Ok(document(
        &workers
            .iter()
            .map(|(name, _)| *name)
            .zip(per)
            .collect::<Vec<_>>(),
    ))
}

/// Reads each queue's numbers, in one round trip.
pub fn queue_stats<'a>(
    conn: &mut SyncConn,
    queues: impl IntoIterator<Item = &'a OrderedQueue>,
) -> Result<Vec<QueueStats>> {
    let queues: Vec<&OrderedQueue> = queues.into_iter().collect();
    let mut pipe = redis::pipe();
    pipe.cmd("TIME");
    for q in &queues {
        pipe.cmd("ZCARD").arg(q.keys().all_ids_lex());
        pipe.cmd("ZCARD")
            .arg(q.keys().morgue_all_ids_scored_by_updated_at());
        pipe.cmd("ZRANGE")
            .arg(q.keys().all_ids_scored_by_perform_in())
            .arg(0)
            .arg(0)
            .arg("WITHSCORES");
        pipe.cmd("GET").arg(q.keys().processed());
        pipe.cmd("GET").arg(q.keys().failed());
        pipe.cmd("HVALS").arg(q.keys().processing_length_by_shard());
    }
    type PerQueue = (
        u64,
        u64,
        Vec<(String, f64)>,
        Option<u64>,
        Option<u64>,
        Vec<i64>,
    );
    let (time, rows): ((u64, u64), Vec<PerQueue>) = {
        let reply: Vec<redis::Value> = conn.pipe(&pipe)?;
        let mut it = reply.into_iter();
        let time: (u64, u64) = conv(it.next().unwrap_or(redis::Value::Nil))?;
        let mut rows = Vec::new();
        while let (Some(len), Some(morgue), Some(oldest), Some(ok), Some(failed), Some(busy)) = (
            it.next(),
            it.next(),
            it.next(),
            it.next(),
            it.next(),
            it.next(),
        ) {
            rows.push((
                conv(len)?,
                conv(morgue)?,
                conv(oldest)?,
                conv(ok)?,
                conv(failed)?,
                conv(busy)?,
            ));
        }
        (time, rows)
    };
    let now = time.0 as f64 + time.1 as f64 / 1e6;
    Ok(rows
        .into_iter()
        .map(
            |(length, morgue_length, oldest, processed, failed, busy)| QueueStats {
                length,
                morgue_length,
                lag: lag(now, oldest.first().map(|(_, at)| *at)),
                processed: processed.unwrap_or(0),
                failed: failed.unwrap_or(0),
                busy: busy.iter().map(|n| (*n).max(0) as u64).sum(),
            },
        )
        .collect())
}

fn conv<T: redis::FromRedisValue>(v: redis::Value) -> Result<T> {
    redis::from_redis_value(v).map_err(|e| crate::Error::redis(format!("ordered stats: {e}")))
}

/// How late the oldest id is at `now`; 0 when there is none or it is not due yet.
pub fn lag(now: f64, oldest_perform_in: Option<f64>) -> f64 {
    match oldest_perform_in {
        None => 0.0,
        // Lowkiq's perform_all_jobs_now writes 0; Lowkiq shows that as 1 s, not 56 years.
        Some(0.0) => 1.0,
        Some(at) => (now - at).max(0.0),
    }
}

/// The stats document from each worker's numbers.
pub fn document(per_worker: &[(&str, QueueStats)]) -> Value {
    let mut by_worker = Map::new();
    let mut total = QueueStats::default();
    for (name, s) in per_worker {
        total.length += s.length;
        total.morgue_length += s.morgue_length;
        total.lag = total.lag.max(s.lag);
        by_worker.insert((*name).to_owned(), one(s));
    }
    json!({ "total": one(&total), "by_worker": by_worker })
}

fn one(s: &QueueStats) -> Value {
    json!({ "length": s.length, "morgue_length": s.morgue_length, "lag": s.lag })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn totals_sum_lengths_and_take_the_largest_lag() {
        let doc = document(&[
            (
                "A",
                QueueStats {
                    length: 2,
                    morgue_length: 1,
                    lag: 3.5,
                    ..QueueStats::default()
                },
            ),
            (
                "B",
                QueueStats {
                    length: 5,
                    morgue_length: 0,
                    lag: 10.0,
                    ..QueueStats::default()
                },
            ),
        ]);
        assert_eq!(doc["total"]["length"], 7);
        assert_eq!(doc["total"]["morgue_length"], 1);
        assert_eq!(doc["total"]["lag"].as_f64(), Some(10.0));
        assert_eq!(doc["by_worker"]["A"]["lag"].as_f64(), Some(3.5));
        assert_eq!(lag(100.0, Some(130.0)), 0.0);
        assert_eq!(lag(100.0, None), 0.0);
        assert_eq!(lag(100.0, Some(90.0)), 10.0);
        assert_eq!(lag(100.0, Some(0.0)), 1.0);
    }
}
