//! Concurrency and rate limits (`queue_core::limits`) for Ruby: `Engine#limits_publish` (a server's
//! classes and their current limits) and `Engine#limits_stats` (the dashboard's and `/metrics`'
//! running / limit / deferred per worker). The per-job check is `Fetcher#limit` (fetcher.rs).

use magnus::{prelude::*, Error, RArray, Ruby};
use queue_core::limits;

use super::engine::{with_conn, Engine};
use crate::errors::blocking;

impl Engine {
    /// `limits_publish([[class, limit], …])`: records the limits and resumes deferred jobs into
    /// slots a raised limit opened. Returns how many resumed.
    fn limits_publish(&self, caps: Vec<(String, u64)>) -> Result<u64, Error> {
        let (redis, id) = (&self.redis, self.id);
        blocking(move || with_conn(redis, id, async |c| limits::publish(c, &caps).await))
    }

    /// `limits_stats`: `[[class, limit or nil, running, deferred], …]`, sorted by class.
    fn limits_stats(ruby: &Ruby, rb_self: &Self) -> Result<RArray, Error> {
        let (redis, id) = (&rb_self.redis, rb_self.id);
        let rows = blocking(move || with_conn(redis, id, async |c| limits::stats(c).await))?;
        let out = ruby.ary_new_capa(rows.len());
        for row in rows {
            out.push((row.class, row.limit, row.running, row.deferred))?;
        }
        Ok(out)
    }
}

pub fn define(native: &magnus::RModule) -> Result<(), Error> {
    let e = native.const_get::<_, magnus::RClass>("Engine")?;
    e.define_method("limits_publish", magnus::method!(Engine::limits_publish, 1))?;
    e.define_method("limits_stats", magnus::method!(Engine::limits_stats, 0))?;
    Ok(())
}
