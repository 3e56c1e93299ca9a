//! Prometheus metrics (`queue_core::metrics`) for Ruby: `Engine#metrics_text(ordered)` answers a
//! scrape — the cluster-wide counters and the gauges read from Redis, encoded by
//! `prometheus-client` — on the calling thread's synchronous connection with the GVL released.
//! `JobQueue::Native::METRICS_CONTENT_TYPE` is the media type of that text. `lib/queue/metrics.rb`
//! serves it as a Rack app.

use magnus::{prelude::*, Error, Ruby};
use queue_core::metrics::{self, OrderedWorker};
use queue_core::ordered::OrderedQueue;

use super::engine::{with_sync, Engine};
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
}

pub fn define(_ruby: &Ruby, native: &magnus::RModule) -> Result<(), Error> {
    native.const_set("METRICS_CONTENT_TYPE", metrics::CONTENT_TYPE)?;
    let e = native.const_get::<_, magnus::RClass>("Engine")?;
    e.define_method("metrics_text", magnus::method!(Engine::metrics_text, 1))?;
    Ok(())
}
