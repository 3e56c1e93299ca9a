//! Cron schedules (`queue_core::cron::store`) for Ruby: `Engine#cron_*` methods behind
//! `JobQueue::Cron` (`lib/queue/cron.rb`). Each runs one engine call on the calling thread's
//! connection with the GVL released. A schedule crosses as an Array of `[field, value]` pairs of its
//! sidekiq-cron hash.

use magnus::{prelude::*, Error};
use queue_core::clock::now_f64;
use queue_core::cron::store::{self, Fields};

use super::engine::{with_conn, Engine};
use crate::errors::{blocking, to_ruby};

impl Engine {
    fn cron_run<T: Send>(
        &self,
        op: impl AsyncFnOnce(&mut queue_core::link::connection::Conn) -> queue_core::Result<T> + Send,
    ) -> Result<T, Error> {
        let (redis, id) = (&self.redis, self.id);
        blocking(move || with_conn(redis, id, op))
    }

    /// `cron_check(name, cron)`: raises ArgumentError naming the schedule if `cron` cannot be used.
    fn cron_check(&self, name: String, cron: String) -> Result<(), Error> {
        store::check(&name, &cron).map(|_| ()).map_err(to_ruby)
    }

    fn cron_save(&self, name: String, fields: Fields) -> Result<(), Error> {
        self.cron_run(async |c| store::save(c, &name, &fields, now_f64()).await)
    }

    fn cron_set_status(&self, name: String, enabled: bool) -> Result<bool, Error> {
        self.cron_run(async |c| store::set_status(c, &name, enabled).await)
    }

    fn cron_destroy(&self, name: String) -> Result<bool, Error> {
        self.cron_run(async |c| store::destroy(c, &name).await)
    }

    fn cron_all(&self) -> Result<Vec<Fields>, Error> {
        self.cron_run(async |c| store::all(c).await)
    }

    fn cron_find(&self, name: String) -> Result<Option<Fields>, Error> {
        self.cron_run(async |c| store::find(c, &name).await)
    }

    /// `cron_run_now(name)`: pushes the schedule's job now (sidekiq-cron's `enque!`); false if there
    /// is no such schedule.
    fn cron_run_now(&self, name: String) -> Result<bool, Error> {
        self.cron_run(async |c| store::run_now(c, &name, now_f64()).await)
    }

    /// `cron_next_tick(name, cron)`: the cron string's first tick after now, in epoch seconds, or nil.
    fn cron_next_tick(&self, name: String, cron: String) -> Result<Option<i64>, Error> {
        store::next_tick(&name, &cron, now_f64().floor() as i64).map_err(to_ruby)
    }

    fn cron_jid_history(&self, name: String) -> Result<Vec<String>, Error> {
        self.cron_run(async |c| store::jid_history(c, &name).await)
    }
}

pub fn define(native: &magnus::RModule) -> Result<(), Error> {
    let e = native.const_get::<_, magnus::RClass>("Engine")?;
    e.define_method("cron_check", magnus::method!(Engine::cron_check, 2))?;
    e.define_method("cron_save", magnus::method!(Engine::cron_save, 2))?;
    e.define_method(
        "cron_set_status",
        magnus::method!(Engine::cron_set_status, 2),
    )?;
    e.define_method("cron_destroy", magnus::method!(Engine::cron_destroy, 1))?;
    e.define_method("cron_all", magnus::method!(Engine::cron_all, 0))?;
    e.define_method("cron_find", magnus::method!(Engine::cron_find, 1))?;
    e.define_method("cron_run_now", magnus::method!(Engine::cron_run_now, 1))?;
    e.define_method("cron_next_tick", magnus::method!(Engine::cron_next_tick, 2))?;
    e.define_method(
        "cron_jid_history",
        magnus::method!(Engine::cron_jid_history, 1),
    )?;
    Ok(())
}
