//! Iterable jobs' progress (`queue_core::iterable`) for Ruby: `Engine#iteration_*` methods behind
//! `JobQueue::Iterable::State` (`lib/queue/iterable/state.rb`), each one engine call on the calling
//! thread's connection with the GVL released. Values cross as the strings stored in the `it-<jid>`
//! hash; Ruby formats and parses them.

use magnus::{prelude::*, Error};
use queue_core::iterable;

use super::engine::{with_conn, Engine};
use crate::errors::blocking;

impl Engine {
    fn iteration_run<T: Send>(
        &self,
        op: impl AsyncFnOnce(&mut queue_core::link::connection::Conn) -> queue_core::Result<T> + Send,
    ) -> Result<T, Error> {
        let (redis, id) = (&self.redis, self.id);
        blocking(move || with_conn(redis, id, op))
    }

    /// `iteration_load(jid)`: nil, or `[ex, c, rt]` (each a String or nil).
    #[allow(clippy::type_complexity)]
    fn iteration_load(
        &self,
        jid: String,
    ) -> Result<Option<(Option<String>, Option<String>, Option<String>)>, Error> {
        let progress = self.iteration_run(async |c| iterable::load(c, &jid).await)?;
        Ok(progress.map(|p| (p.executions, p.cursor, p.runtime)))
    }

    /// `iteration_save(jid, ex, c, rt)`: the `cancelled` field (String or nil).
    fn iteration_save(
        &self,
        jid: String,
        executions: String,
        cursor: String,
        runtime: String,
    ) -> Result<Option<String>, Error> {
        self.iteration_run(async |c| iterable::save(c, &jid, &executions, &cursor, &runtime).await)
    }

    /// `iteration_cancel(jid, now)`: the epoch second the job was first cancelled.
    fn iteration_cancel(&self, jid: String, now: i64) -> Result<i64, Error> {
        self.iteration_run(async |c| iterable::cancel(c, &jid, now).await)
    }

    fn iteration_cancelled(&self, jid: String) -> Result<Option<String>, Error> {
        self.iteration_run(async |c| iterable::cancelled(c, &jid).await)
    }

    fn iteration_delete(&self, jid: String) -> Result<bool, Error> {
        self.iteration_run(async |c| iterable::delete(c, &jid).await)
    }
}

pub fn define(native: &magnus::RModule) -> Result<(), Error> {
    let e = native.const_get::<_, magnus::RClass>("Engine")?;
    e.define_method("iteration_load", magnus::method!(Engine::iteration_load, 1))?;
    e.define_method("iteration_save", magnus::method!(Engine::iteration_save, 4))?;
    e.define_method(
        "iteration_cancel",
        magnus::method!(Engine::iteration_cancel, 2),
    )?;
    e.define_method(
        "iteration_cancelled",
        magnus::method!(Engine::iteration_cancelled, 1),
    )?;
    e.define_method(
        "iteration_delete",
        magnus::method!(Engine::iteration_delete, 1),
    )?;
    Ok(())
}
