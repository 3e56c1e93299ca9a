//! Prometheus metrics (`queue_core::metrics`) for Ruby: `Engine#metrics_text(ordered)` answers a
//! scrape — the cluster-wide counters and the gauges read from Redis, encoded by
//! `prometheus-client` — on the calling thread's synchronous connection with the GVL released.
//! `JobQueue::Native::METRICS_CONTENT_TYPE` is the media type of that text. `lib/queue/metrics.rb`
//! serves it as a Rack app.
//!
//! `Engine#sidekiq_metrics_query(version, minutes, class)` reads back the Sidekiq 7/8 Metrics data
//! (`queue_core::metrics::sidekiq_query`) for the dashboard's Metrics page.

use magnus::{prelude::*, Error, Ruby};
use queue_core::metrics::{self, OrderedWorker};
use queue_core::ordered::OrderedQueue;

use queue_core::metrics::sidekiq::{now_minute, Version};
use queue_core::metrics::sidekiq_query;

use super::engine::{with_conn, with_sync, Engine};
use crate::errors::{blocking, to_ruby};

impl Engine {
    /// `metrics_text([[worker_name, queue, shards_count], ...])`: the exposition text, the ordered
    /// workers given reported by name.
    fn metrics_text(&self, ordered: Vec<(String, String, u32)>) -> Result<String, Error> {
        let namespace = self.redis.keys().namespace().to_owned();
        let workers = ordered
            .into_iter()
            .map(|(name, queue, shards)| {
                Ok(OrderedWorker {
                    name,
                    queue: OrderedQueue::new(&namespace, &queue, shards).map_err(to_ruby)?,
                })
            })
            .collect::<Result<Vec<_>, Error>>()?;
        let (redis, id) = (&self.redis, self.id);
        blocking(move || with_sync(redis, id, |c| metrics::text(c, &workers)))
    }

    /// `sidekiq_metrics_query(version, minutes, class)`: `[[[class, processed, failed, ms], ...],
    /// histogram]` over the last `minutes` minutes (now included), classes by name; `histogram` is
    /// `class`'s 26 bucket counts, or nil when `class` is nil.
    #[allow(clippy::type_complexity)]
    fn sidekiq_metrics_query(
        &self,
        version: i64,
        minutes: u32,
        class: Option<String>,
    ) -> Result<(Vec<(String, u64, u64, u64)>, Option<Vec<u64>>), Error> {
        let version = Version::from_major(version).map_err(to_ruby)?;
        let (redis, id) = (&self.redis, self.id);
        let report = blocking(move || {
            with_conn(redis, id, async |c| {
                sidekiq_query::query(c, version, now_minute(), minutes, class.as_deref()).await
            })
        })?;
        let classes = report
            .classes
            .into_iter()
            .map(|(name, t)| (name, t.processed, t.failed, t.ms))
            .collect();
        Ok((classes, report.histogram.map(|h| h.to_vec())))
    }
}

pub fn define(_ruby: &Ruby, native: &magnus::RModule) -> Result<(), Error> {
    native.const_set("METRICS_CONTENT_TYPE", metrics::CONTENT_TYPE)?;
    let e = native.const_get::<_, magnus::RClass>("Engine")?;
    e.define_method("metrics_text", magnus::method!(Engine::metrics_text, 1))?;
    e.define_method(
        "sidekiq_metrics_query",
        magnus::method!(Engine::sidekiq_metrics_query, 3),
    )?;
    Ok(())
}
