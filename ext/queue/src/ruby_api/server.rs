//! `JobQueue::Native::Server`: the engine side of one running server process (heartbeat, scheduler,
//! recovery, idle waiters), and the factory of each processor thread's fetcher.

use magnus::{prelude::*, Error, Ruby};

use super::fetcher::Fetcher;
use crate::errors::{blocking, to_ruby};

#[magnus::wrap(class = "JobQueue::Native::Server", free_immediately, size)]
pub struct Server {
    inner: queue_core::server::Server,
}

impl Server {
    pub fn new(inner: queue_core::server::Server) -> Server {
        Server { inner }
    }

    fn identity(&self) -> String {
        self.inner.identity().to_owned()
    }

    /// A fetcher for the processor thread named `tid` (registers its working lists in Redis).
    fn fetcher(&self, tid: String) -> Result<Fetcher, Error> {
        let inner = &self.inner;
        let fetcher = blocking(move || inner.fetcher(&tid))?;
        Ok(Fetcher::new(fetcher))
    }

    /// `fetcher_in(capsule, tid)`: a fetcher for a thread of capsule `capsule` (0: the default one,
    /// then the `capsules` option of `start_server` in order).
    fn fetcher_in(&self, capsule: usize, tid: String) -> Result<Fetcher, Error> {
        let inner = &self.inner;
        let fetcher = blocking(move || inner.fetcher_in(capsule, &tid))?;
        Ok(Fetcher::new(fetcher))
    }

    /// Stop handing out work; parked processor threads return nil at once.
    fn quiet(&self) {
        self.inner.quiet();
    }

    /// A stop begins: quiet, and `STOPPING=1` to a service manager (systemd) if one listens.
    fn stopping(&self) {
        self.inner.stopping();
    }

    /// End background work and put every job still held back on its queue. Returns how many.
    fn stop(&self) -> Result<usize, Error> {
        let inner = &self.inner;
        blocking(move || inner.stop())
    }

    /// How many processor threads are running a job now.
    fn busy_count(&self) -> usize {
        self.inner.busy_count()
    }

    /// Signal names a dashboard sent since the last call.
    fn take_signals(&self) -> Vec<String> {
        self.inner.take_signals()
    }
}

pub fn define(ruby: &Ruby, native: &magnus::RModule) -> Result<(), Error> {
    let class = native.define_class("Server", ruby.class_object())?;
    class.undef_default_alloc_func();
    class.define_method("identity", magnus::method!(Server::identity, 0))?;
    class.define_method("fetcher", magnus::method!(Server::fetcher, 1))?;
    class.define_method("fetcher_in", magnus::method!(Server::fetcher_in, 2))?;
    class.define_method("quiet", magnus::method!(Server::quiet, 0))?;
    class.define_method("stopping", magnus::method!(Server::stopping, 0))?;
    class.define_method("stop", magnus::method!(Server::stop, 0))?;
    class.define_method("take_signals", magnus::method!(Server::take_signals, 0))?;
    class.define_method("busy_count", magnus::method!(Server::busy_count, 0))?;
    let _ = to_ruby;
    Ok(())
}
