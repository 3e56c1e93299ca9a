//! The beat of a process's ordered queues: one thread that balances every queue's shard leases each
//! [`BEAT_INTERVAL`] (renewing them, taking over dead owners' shards, handing shards over), and tells
//! the processor threads which shards each of them fetches.
//!
//! It runs on its own OS thread with its own synchronous connection, so it needs no runtime and a slow
//! fetch never delays a beat (a late beat could let leases lapse). The first beat runs in
//! [`OrderedShards::start`], so the first fetch already has shards (and their abandoned in-flight state
//! is back in the queue). [`OrderedShards::stop`] ends the thread and releases every lease, so the other
//! processes take the shards at their next beat instead of after `DEAD_AFTER`.

use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::error::{Error, Result};
use crate::link::blocking::SyncConn;
use crate::link::connection::Redis;
use crate::liveness::BEAT_INTERVAL;

use super::lease::Ownership;

struct Shared {
    owners: Mutex<Vec<Ownership>>,
    stopping: Mutex<bool>,
    wake: Condvar,
}

/// The shard leases of one process's ordered queues, kept alive by a beat thread.
pub struct OrderedShards {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
    redis: Redis,
}

impl OrderedShards {
    /// Beats once for every queue (claiming and recovering shards), then starts the beat thread.
    pub fn start(redis: &Redis, owners: Vec<Ownership>) -> Result<OrderedShards> {
        OrderedShards::start_with_interval(redis, owners, BEAT_INTERVAL)
    }

    /// [`OrderedShards::start`] with another beat interval (tests; it must stay well under
    /// `DEAD_AFTER`, or live processes would be taken for dead).
    pub fn start_with_interval(
        redis: &Redis,
        mut owners: Vec<Ownership>,
        interval: Duration,
    ) -> Result<OrderedShards> {
        let mut conn = SyncConn::new(redis);
        for own in &mut owners {
            own.balance(&mut conn)?;
        }
        let shared = Arc::new(Shared {
            owners: Mutex::new(owners),
            stopping: Mutex::new(false),
            wake: Condvar::new(),
        });
        let beat = shared.clone();
        let thread = std::thread::Builder::new()
            .name("queue-ordered-beat".to_owned())
            .spawn(move || beat_loop(&beat, &mut conn, interval))
            .map_err(|e| Error::closed_by("cannot start the ordered beat thread", e))?;
        Ok(OrderedShards {
            shared,
            thread: Some(thread),
            redis: redis.clone(),
        })
    }

    /// The shards of `queue` that processor thread `thread` of `threads` fetches from now.
    pub fn thread_shards(&self, queue: &str, thread: usize, threads: usize) -> Vec<u32> {
        self.shards_of(queue, |o| o.thread_shards(thread, threads))
    }

    /// Every shard of `queue` this process holds now.
    pub fn owned(&self, queue: &str) -> Vec<u32> {
        self.shards_of(queue, Ownership::owned)
    }

    /// `pick` applied to the ownership of `queue`; no shards for a queue this process does not serve.
    fn shards_of(&self, queue: &str, pick: impl FnOnce(&Ownership) -> Vec<u32>) -> Vec<u32> {
        let owners = self
            .shared
            .owners
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        owners
            .iter()
            .find(|o| o.queue().name() == queue)
            .map(pick)
            .unwrap_or_default()
    }

    /// Ends the beat thread and releases every lease. Call once the processor threads have settled
    /// their last batch. Every queue is attempted; the failures are named together.
    pub fn stop(mut self) -> Result<()> {
        self.halt();
        let mut conn = SyncConn::new(&self.redis);
        let mut owners = self
            .shared
            .owners
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let mut failed = Vec::new();
        for own in owners.iter_mut() {
            if let Err(e) = own.leave(&mut conn) {
                failed.push(("release the shards of an ordered queue", e));
            }
        }
        if failed.is_empty() {
            Ok(())
        } else {
            Err(Error::incomplete("stopping ordered queues", failed))
        }
    }

    fn halt(&mut self) {
        *self
            .shared
            .stopping
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = true;
        self.shared.wake.notify_all();
        if let Some(t) = self.thread.take() {
            // A panic in the beat thread has been logged by the panic hook; nothing to add.
            let _ = t.join();
        }
    }
}

impl Drop for OrderedShards {
    /// Stops beating (the leases then lapse after `DEAD_AFTER`); [`OrderedShards::stop`] also releases.
    fn drop(&mut self) {
        self.halt();
    }
}

fn beat_loop(shared: &Shared, conn: &mut SyncConn, interval: Duration) {
    loop {
        {
            let stopping = shared
                .stopping
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            let (stopping, _) = shared
                .wake
                .wait_timeout_while(stopping, interval, |s| !*s)
                .unwrap_or_else(PoisonError::into_inner);
            if *stopping {
                return;
            }
        }
        // Balance copies, so fetchers reading their shards never wait on a Redis round trip.
        let mut owners: Vec<Ownership> = shared
            .owners
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        for own in &mut owners {
            match own.balance(conn) {
                Ok(b) if !b.acquired.is_empty() || !b.released.is_empty() => tracing::info!(
                    queue = own.queue().name(),
                    acquired = ?b.acquired,
                    released = ?b.released,
                    recovered = b.recovered,
                    "ordered shards moved"
                ),
                Ok(_) => {}
                Err(e) => tracing::warn!(
                    queue = own.queue().name(),
                    error = %e,
                    "ordered shard beat failed; retrying at the next beat"
                ),
            }
        }
        *shared.owners.lock().unwrap_or_else(PoisonError::into_inner) = owners;
    }
}
