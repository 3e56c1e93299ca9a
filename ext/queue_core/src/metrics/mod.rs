//! Prometheus metrics, counted in the engine and cluster-wide.
//!
//! - [`tally`]: each fetcher counts its jobs in memory (processed or failed, and the duration in a
//!   histogram) per class and queue — a lock nobody else holds and a few additions per job, never a
//!   Redis write;
//! - [`flush`]: every liveness beat (and on stop) the process adds what it counted since the last
//!   flush to one Redis hash (`jq:metrics`) in one `MULTI` of `HINCRBY`/`HINCRBYFLOAT`, so any process
//!   — a server or the web process that serves `/metrics` — reads the same cluster-wide totals. The
//!   dedup push script adds its drops to the same hash itself. A `kill -9` loses the counts of at
//!   most one beat interval;
//! - [`scrape`]: one scrape reads that hash and the gauges (queue sizes and latencies, set sizes,
//!   processes, busy, ordered morgues) in three pipelined round trips: Redis work O(queues + processes
//!   + ordered workers + counted series), never O(jobs);
//! - [`encode`]: the snapshot encoded by the `prometheus-client` crate (OpenMetrics text).
//!
//! [`field`] names the hash's fields. [`sidekiq`] adds to the same flush the per-minute keys behind
//! Sidekiq 7/8's own Metrics page (`config.sidekiq_metrics`); [`sidekiq_query`] reads them back for
//! our dashboard's Metrics page.

pub mod encode;
pub mod field;
pub mod flush;
pub mod scrape;
pub mod sidekiq;
pub mod sidekiq_query;
pub mod tally;

pub use encode::{encode, CONTENT_TYPE};
pub use scrape::{scrape, OrderedWorker, Snapshot};
pub use tally::{Metrics, Tally, BUCKETS};

use crate::error::Result;
use crate::link::blocking::SyncConn;

/// Scrapes and encodes: the whole `/metrics` answer.
pub fn text(conn: &mut SyncConn, ordered: &[OrderedWorker]) -> Result<String> {
    let snapshot = scrape(conn, ordered)?;
    encode(snapshot)
}
