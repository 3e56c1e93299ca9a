//! What every fetcher of one process shares: its settings, the hand-off from the idle waiters to
//! parked threads, the batches siblings may steal from, and the jobs running right now.
//!
//! Nothing here talks to Redis: the heartbeat reads it, the idle waiters and fetchers change it.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::link::connection::Redis;
use crate::metrics::sidekiq::Version as SidekiqVersion;
use crate::metrics::Metrics;
use crate::pause::PausedFlags;

use super::{QueueOrder, Unit};

/// A job a thread is running, as the heartbeat publishes it.
#[derive(Debug, Clone)]
pub struct Busy {
    pub tid: String,
    pub queue: String,
    pub raw: Vec<u8>,
    pub run_at: i64,
}

/// State shared by every fetcher of a process, its idle waiters and its heartbeat.
pub struct FetchShared {
    pub redis: Redis,
    pub identity: String,
    pub order: QueueOrder,
    pub concurrency: usize,
    pub max_batch: usize,
    /// The slot of this capsule's idle waiters' working lists (`idle`, or `idle-<capsule>`).
    pub idle_slot: String,
    /// What the fetchers counted for Prometheus, flushed with the liveness beat.
    pub metrics: Metrics,
    /// Which of the process's queues are paused (`pause.rs`), by queue index.
    pub paused: PausedFlags,
    /// Concurrency slots and rate tokens this capsule leased (`limits::lease`).
    pub leases: crate::limits::Leases,
    /// Which batches are valid, read once a second for all of this capsule's fetchers.
    pub batch_validity: crate::batch::validity::Validity,
    quiet: AtomicBool,
    handoff: Mutex<VecDeque<Unit>>,
    work_ready: Condvar,
    idle_threads: AtomicUsize,
    /// Tokens of fetch calls, unique within the process (see [`super::calls::claim_lost_batch`]).
    fetch_tokens: AtomicU64,
    /// Wakes the idle waiters when a thread parks (and on quiet).
    pub(crate) idle_wakeup: tokio::sync::Notify,
    slots: Mutex<Vec<Arc<Mutex<Slot>>>>,
    working_lists: Mutex<Vec<(String, String)>>,
    blocked_clients: Mutex<Vec<(String, i64)>>,
}

/// What one fetcher holds, visible to its siblings and the heartbeat.
#[derive(Debug, Default)]
pub(crate) struct Slot {
    pub(crate) tid: String,
    /// Prefetched jobs, next first. Siblings steal from the back.
    pub(crate) buffer: VecDeque<Unit>,
    /// The running job and when it started (shown as epoch seconds by the heartbeat's busy entry).
    pub(crate) current: Option<(Unit, Instant)>,
    /// The fetcher owes a batch's dirty mark that the job at the front of `buffer` will write
    /// (`Fetcher`'s `owed_mark`): that job is not stolen, so it stays this fetcher's to run.
    pub(crate) owes_mark: bool,
}

impl Slot {
    /// How many of its buffered jobs a sibling may take: all of them, but the front one while the
    /// fetcher owes a mark that job's ack writes.
    fn stealable(&self) -> usize {
        let kept = usize::from(self.owes_mark && !self.buffer.is_empty());
        self.buffer.len() - kept
    }
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding one of these locks leaves plain data behind; keep going with it.
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl FetchShared {
    pub fn new(
        redis: Redis,
        identity: &str,
        order: QueueOrder,
        concurrency: usize,
        max_batch: usize,
    ) -> Arc<FetchShared> {
        FetchShared::with_sidekiq_metrics(redis, identity, order, concurrency, max_batch, None)
    }

    /// [`FetchShared::new`], also writing Sidekiq's Metrics page data of `sidekiq_metrics`'s version.
    pub fn with_sidekiq_metrics(
        redis: Redis,
        identity: &str,
        order: QueueOrder,
        concurrency: usize,
        max_batch: usize,
        sidekiq_metrics: Option<SidekiqVersion>,
    ) -> Arc<FetchShared> {
        FetchShared::for_capsule(
            redis,
            identity,
            order,
            concurrency,
            max_batch,
            sidekiq_metrics,
            super::idle::SLOT.to_owned(),
        )
    }

    /// One capsule of a process (`crate::capsules`): [`FetchShared::with_sidekiq_metrics`] whose idle
    /// waiters use working lists of slot `idle_slot`.
    pub fn for_capsule(
        redis: Redis,
        identity: &str,
        order: QueueOrder,
        concurrency: usize,
        max_batch: usize,
        sidekiq_metrics: Option<SidekiqVersion>,
        idle_slot: String,
    ) -> Arc<FetchShared> {
        let metrics =
            Metrics::with_sidekiq(order.names().map(str::to_owned).collect(), sidekiq_metrics);
        Arc::new(FetchShared {
            redis,
            metrics,
            paused: PausedFlags::new(order.len()),
            leases: crate::limits::Leases::default(),
            batch_validity: Default::default(),
            identity: identity.to_owned(),
            order,
            concurrency: concurrency.max(1),
            max_batch: max_batch.max(1),
            idle_slot,
            quiet: AtomicBool::new(false),
            handoff: Mutex::new(VecDeque::new()),
            work_ready: Condvar::new(),
            idle_threads: AtomicUsize::new(0),
            fetch_tokens: AtomicU64::new(1),
            idle_wakeup: tokio::sync::Notify::new(),
            slots: Mutex::new(Vec::new()),
            working_lists: Mutex::new(Vec::new()),
            blocked_clients: Mutex::new(Vec::new()),
        })
    }

    /// Stop handing out work. Parked threads wake and get `None`.
    pub fn quiet(&self) {
        self.quiet.store(true, Ordering::SeqCst);
        let _guard = lock(&self.handoff);
        self.work_ready.notify_all();
        self.idle_wakeup.notify_waiters();
    }

    pub fn is_quiet(&self) -> bool {
        self.quiet.load(Ordering::SeqCst)
    }

    pub(crate) fn idle_threads(&self) -> usize {
        self.idle_threads.load(Ordering::SeqCst)
    }

    pub(crate) fn next_token(&self) -> u64 {
        self.fetch_tokens.fetch_add(1, Ordering::Relaxed)
    }

    /// Called by an idle waiter with a job it moved into its working list.
    /// Gives the job back instead when the process went quiet meanwhile: no thread will take it.
    pub(crate) fn hand_off(&self, unit: Unit) -> Option<Unit> {
        let mut handoff = lock(&self.handoff);
        // Checked under the lock `quiet` takes after setting the flag, so a job handed off here is
        // either seen by a parked thread or returned by `take_handoff` when the process stops.
        if self.is_quiet() {
            return Some(unit);
        }
        handoff.push_back(unit);
        self.work_ready.notify_one();
        None
    }

    /// A job an idle waiter handed over, if one waits.
    pub(crate) fn try_handoff(&self) -> Option<Unit> {
        lock(&self.handoff).pop_front()
    }

    pub(crate) fn take_handoff(&self) -> Vec<Unit> {
        lock(&self.handoff).drain(..).collect()
    }

    /// Waits up to `wait` for an idle waiter to hand over a job; `None` on timeout or quiet. While a
    /// thread is parked here the idle waiters block on Redis for it.
    pub(crate) fn park(&self, wait: Duration) -> Option<Unit> {
        let mut handoff = lock(&self.handoff);
        self.idle_threads.fetch_add(1, Ordering::SeqCst);
        self.idle_wakeup.notify_waiters();
        let deadline = Instant::now() + wait;
        let unit = loop {
            if let Some(unit) = handoff.pop_front() {
                break Some(unit);
            }
            let now = Instant::now();
            if self.is_quiet() || now >= deadline {
                break None;
            }
            handoff = self
                .work_ready
                .wait_timeout(handoff, deadline - now)
                .map(|(guard, _)| guard)
                .unwrap_or_else(|poisoned| poisoned.into_inner().0);
        };
        self.idle_threads.fetch_sub(1, Ordering::SeqCst);
        unit
    }

    /// Records (or clears) the client id of the idle waiter of `queue` while its `BLMOVE` runs.
    pub(crate) fn set_blocked_client(&self, queue: &str, id: Option<i64>) {
        let mut all = lock(&self.blocked_clients);
        all.retain(|(q, _)| q != queue);
        if let Some(id) = id {
            all.push((queue.to_owned(), id));
        }
    }

    /// The client id of the idle waiter of `queue`, while its `BLMOVE` runs.
    pub(crate) fn blocked_client(&self, queue: &str) -> Option<i64> {
        lock(&self.blocked_clients)
            .iter()
            .find(|(q, _)| q == queue)
            .map(|(_, id)| *id)
    }

    /// Client ids of the idle waiters blocked right now.
    pub fn blocked_clients(&self) -> Vec<i64> {
        lock(&self.blocked_clients)
            .iter()
            .map(|(_, id)| *id)
            .collect()
    }

    /// Working lists this process owns, as (key, queue), for the liveness beat to re-register.
    pub fn working_lists(&self) -> Vec<(String, String)> {
        lock(&self.working_lists).clone()
    }

    pub(crate) fn add_working_lists(&self, lists: &[(String, String)]) {
        let mut all = lock(&self.working_lists);
        for l in lists {
            if !all.contains(l) {
                all.push(l.clone());
            }
        }
    }

    /// How many threads are running a job right now.
    pub fn busy_count(&self) -> usize {
        lock(&self.slots)
            .iter()
            .filter(|slot| lock(slot).current.is_some())
            .count()
    }

    /// The jobs running right now, one per busy thread.
    pub fn busy(&self) -> Vec<Busy> {
        lock(&self.slots)
            .iter()
            .filter_map(|slot| {
                let s = lock(slot);
                s.current.as_ref().map(|(u, started)| Busy {
                    tid: s.tid.clone(),
                    queue: u.queue.to_string(),
                    raw: u.raw.clone(),
                    run_at: crate::clock::unix_secs_at(*started),
                })
            })
            .collect()
    }

    /// Takes the newest unstarted job of the sibling holding the most, so a prefetched batch never
    /// waits behind a slow job while another thread of the process is idle. The job stays in its
    /// working list, and its ack names that list, so nothing about its safety changes. A job of a
    /// paused queue is left for its fetcher to hand back, and so is the last job of a fetcher that
    /// owes a batch's mark (its ack writes the mark on the connection that owes it).
    pub(crate) fn steal(&self, me: &Arc<Mutex<Slot>>) -> Option<Unit> {
        let slots = lock(&self.slots);
        let mut best: Option<(&Arc<Mutex<Slot>>, usize)> = None;
        for slot in slots.iter().filter(|s| !Arc::ptr_eq(s, me)) {
            let held = lock(slot).stealable();
            if held > 0 && best.is_none_or(|(_, most)| held > most) {
                best = Some((slot, held));
            }
        }
        let (slot, _) = best?;
        let mut s = lock(slot);
        if s.stealable() == 0 || self.paused.is_paused(s.buffer.back()?.index) {
            return None;
        }
        s.buffer.pop_back()
    }

    pub(crate) fn register(&self, slot: Arc<Mutex<Slot>>) {
        lock(&self.slots).push(slot);
    }

    pub(crate) fn unregister(&self, slot: &Arc<Mutex<Slot>>) {
        lock(&self.slots).retain(|s| !Arc::ptr_eq(s, slot));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::RedisConfig;

    fn shared() -> Arc<FetchShared> {
        // Nothing here dials: the URL is only parsed.
        let redis = Redis::new(RedisConfig::new("redis://127.0.0.1:1", "")).expect("url");
        let order = QueueOrder::new(vec![("default".into(), 1)], true).expect("order");
        FetchShared::new(redis, "host:1:abc", order, 4, 20)
    }

    fn unit(n: u8) -> Unit {
        Unit::new(0, "default".into(), vec![n], "w".into())
    }

    fn slot_with(shared: &FetchShared, tid: &str, jobs: &[u8]) -> Arc<Mutex<Slot>> {
        let slot = Arc::new(Mutex::new(Slot {
            tid: tid.into(),
            buffer: jobs.iter().map(|&n| unit(n)).collect(),
            current: None,
            owes_mark: false,
        }));
        shared.register(slot.clone());
        slot
    }

    #[test]
    fn steals_the_newest_job_of_the_sibling_holding_the_most() {
        let shared = shared();
        let me = slot_with(&shared, "me", &[]);
        let few = slot_with(&shared, "few", &[1]);
        let many = slot_with(&shared, "many", &[2, 3, 4]);
        assert_eq!(shared.steal(&me), Some(unit(4)));
        assert_eq!(lock(&many).buffer.len(), 2);
        assert_eq!(shared.steal(&me), Some(unit(3)));
        // Now both hold one; either may give it, but never the thief's own.
        let third = shared.steal(&me).expect("a job");
        assert!(third == unit(1) || third == unit(2));
        shared.steal(&me).expect("the last one");
        assert_eq!(shared.steal(&me), None);
        assert!(lock(&few).buffer.is_empty() && lock(&many).buffer.is_empty());
    }

    #[test]
    fn leaves_the_last_job_of_a_fetcher_that_owes_a_mark() {
        let shared = shared();
        let me = slot_with(&shared, "me", &[]);
        let owing = slot_with(&shared, "owing", &[1, 2]);
        lock(&owing).owes_mark = true;
        let other = slot_with(&shared, "other", &[3]);
        // Both offer one job: the owing fetcher's front stays; the newest behind it may go.
        let first = shared.steal(&me).expect("a job");
        let second = shared.steal(&me).expect("another job");
        let mut stolen = vec![first, second];
        stolen.sort_by_key(|u| u.raw.clone());
        assert_eq!(stolen, vec![unit(2), unit(3)]);
        assert_eq!(shared.steal(&me), None);
        assert_eq!(lock(&owing).buffer.front(), Some(&unit(1)));
        lock(&owing).owes_mark = false;
        assert_eq!(shared.steal(&me), Some(unit(1)));
        assert!(lock(&other).buffer.is_empty());
    }

    #[test]
    fn never_steals_from_itself_or_an_unregistered_slot() {
        let shared = shared();
        let me = slot_with(&shared, "me", &[1, 2]);
        assert_eq!(shared.steal(&me), None);
        let other = slot_with(&shared, "other", &[3]);
        shared.unregister(&other);
        assert_eq!(shared.steal(&me), None);
    }

    #[test]
    fn a_parked_thread_gets_a_handed_off_job() {
        let shared = shared();
        let parked = {
            let shared = shared.clone();
            std::thread::spawn(move || shared.park(Duration::from_secs(10)))
        };
        // Hand off once the thread is parked (it counts itself idle under the hand-off lock).
        while shared.idle_threads() == 0 {
            std::thread::yield_now();
        }
        assert_eq!(shared.hand_off(unit(7)), None);
        assert_eq!(parked.join().expect("thread"), Some(unit(7)));
        assert_eq!(shared.idle_threads(), 0);
    }

    #[test]
    fn parking_ends_on_timeout_and_on_quiet() {
        let shared = shared();
        assert_eq!(shared.park(Duration::from_millis(20)), None);
        let parked = {
            let shared = shared.clone();
            std::thread::spawn(move || shared.park(Duration::from_secs(30)))
        };
        while shared.idle_threads() == 0 {
            std::thread::yield_now();
        }
        let quieted = Instant::now();
        shared.quiet();
        assert_eq!(parked.join().expect("thread"), None);
        assert!(quieted.elapsed() < Duration::from_secs(5));
        // A quiet process gives a job back to its waiter instead of holding it.
        assert_eq!(shared.hand_off(unit(8)), Some(unit(8)));
        assert!(shared.take_handoff().is_empty());
    }
}
