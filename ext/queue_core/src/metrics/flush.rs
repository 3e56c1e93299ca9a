//! Adds a process's counts to the cluster-wide hash: one `MULTI` of `HINCRBY` (and `HINCRBYFLOAT`
//! for the duration sums), O(classes × queues × buckets) fields, whatever the number of jobs; and
//! the expired jobs' total to `jq:stat:expired`, beside Sidekiq's `stat:processed`.
//!
//! When Sidekiq's Metrics page data is on ([`super::sidekiq`]), the same `MULTI` also writes its
//! per-minute hashes and histograms.
//!
//! Called with every liveness beat (3 s) and once more when the server stops, after its processors
//! finished. A flush that fails keeps its counts for the next one; one whose reply was lost after
//! Redis ran it counts them twice (rare: the connection must break between the two). A `kill -9`
//! loses what was counted since the last beat.

use crate::error::Result;
use crate::keys::Keys;
use crate::link::connection::Conn;

use super::field::{self, Kind};
use super::sidekiq::{self, Version};
use super::tally::{Metrics, Tally, BUCKETS};

/// The writes for `tally` (queue names by index in `queues`), or `None` when there is nothing;
/// with Sidekiq's Metrics page keys of version `sidekiq` if given.
pub fn pipeline(
    keys: &Keys,
    queues: &[String],
    tally: &Tally,
    sidekiq: Option<Version>,
) -> Result<Option<redis::Pipeline>> {
    if tally.is_empty() {
        return Ok(None);
    }
    let hash = keys.metrics();
    let mut pipe = redis::pipe();
    pipe.atomic();
    for (index, class, s) in tally.series() {
        let Some(queue) = queues.get(index) else {
            continue;
        };
        let mut incr = |kind: Kind, by: u64| {
            if by > 0 {
                pipe.cmd("HINCRBY")
                    .arg(&hash)
                    .arg(field::name(kind, queue, class))
                    .arg(by)
                    .ignore();
            }
        };
        incr(Kind::Processed, s.processed);
        incr(Kind::Failed, s.failed);
        incr(Kind::Expired, s.expired);
        for (i, &n) in s.buckets.iter().enumerate() {
            incr(
                Kind::Bucket(BUCKETS.get(i).copied().unwrap_or(f64::INFINITY)),
                n,
            );
        }
        pipe.cmd("HINCRBYFLOAT")
            .arg(&hash)
            .arg(field::name(Kind::Sum, queue, class))
            .arg(s.sum)
            .ignore();
    }
    let expired = tally.expired();
    if expired > 0 {
        pipe.cmd("INCRBY")
            .arg(keys.stat_expired())
            .arg(expired)
            .ignore();
    }
    if let Some(version) = sidekiq {
        let minutes = tally
            .series()
            .flat_map(|(_, class, s)| s.sidekiq.iter().map(move |m| (class, m)));
        sidekiq::writes(&mut pipe, keys, version, minutes)?;
    }
    Ok(Some(pipe))
}

/// Flushes what `metrics` counted since the last flush. Returns whether anything was written.
pub async fn flush(conn: &mut Conn, metrics: &Metrics) -> Result<bool> {
    let tally = metrics.take();
    let pipe = match pipeline(conn.keys(), metrics.queues(), &tally, metrics.sidekiq()) {
        Ok(Some(pipe)) => pipe,
        Ok(None) => return Ok(false),
        Err(e) => {
            metrics.put_back(&tally);
            return Err(e);
        }
    };
    match conn.pipe::<()>(&pipe).await {
        Ok(()) => Ok(true),
        Err(e) => {
            metrics.put_back(&tally);
            Err(e)
        }
    }
}
