//! Reliable fetch: how a processor thread gets its next job without any crash losing it.
//!
//! A job leaves `queue:<name>` only by `LMOVE` into a working list that belongs to one fetcher of one
//! live process (`jq:working:<identity>:<slot>:<queue>`), and leaves the working list only when it is
//! acknowledged (done, or filed in `retry`/`dead`). A process that dies leaves its working lists behind;
//! [`recovery`] pushes them back onto their queues once the process stops beating.
//!
//! The hot path is batched: one `fetch.lua` call acknowledges the jobs finished since the last call and
//! takes the next batch (up to `max_batch`, but only a fair share of a shallow queue), so a busy thread
//! costs Redis one round trip per batch, not two per job. Jobs of a batch wait in memory only while they
//! also sit in the working list, so prefetching is as safe as fetching one at a time.
//!
//! A thread whose queue ran dry takes unstarted jobs from a sibling's batch before it parks, so a deep
//! prefetch never leaves jobs waiting behind a slow one while a thread is idle.
//!
//! When every queue is empty, threads do not poll. They park on a condition variable, and the
//! process's [`idle`] waiters — one blocking `BLMOVE` per queue on the shared runtime, issued only while
//! some thread is parked — hand over the next job the moment it is pushed.

pub mod idle;
pub mod order;
pub mod recovery;

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use redis::Value;

use crate::clock::{now_f64, utc_date};
use crate::connection::{Conn, Redis};
use crate::error::{Error, Result};
use crate::job::Job;
use crate::retry::{self, Failure, Fate};
use crate::scripts;

pub use order::QueueOrder;

/// Sidekiq keeps daily stat keys for five years.
pub const STATS_TTL_SECS: i64 = 5 * 365 * 24 * 60 * 60;
/// After an empty fetch a parked thread asks Redis again only this often; new work normally reaches
/// it sooner through the idle waiters.
const IDLE_RECHECK: Duration = Duration::from_secs(10);

/// One job handed to a processor.
#[derive(Debug, Clone)]
pub struct Unit {
    pub queue: String,
    pub raw: Vec<u8>,
    /// The working list that holds it until it is acknowledged.
    pub working: String,
}

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
    quiet: AtomicBool,
    handoff: Mutex<VecDeque<Unit>>,
    work_ready: Condvar,
    idle_threads: AtomicUsize,
    /// Tokens of fetch calls, unique within the process (see [`Fetcher::fetch_batch`]).
    fetch_tokens: AtomicU64,
    /// Wakes the idle waiters when a thread parks (and on quiet).
    pub(crate) idle_wakeup: tokio::sync::Notify,
    slots: Mutex<Vec<Arc<Mutex<Slot>>>>,
    working_lists: Mutex<Vec<(String, String)>>,
    blocked_clients: Mutex<Vec<(String, i64)>>,
}

/// What one fetcher holds, visible to the heartbeat.
#[derive(Debug, Default)]
struct Slot {
    tid: String,
    buffer: VecDeque<Unit>,
    current: Option<(Unit, i64)>,
    acks: Vec<Unit>,
    oldest_ack: Option<Instant>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
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
        Arc::new(FetchShared {
            redis,
            identity: identity.to_owned(),
            order,
            concurrency: concurrency.max(1),
            max_batch: max_batch.max(1),
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

    pub(crate) fn take_handoff(&self) -> Vec<Unit> {
        lock(&self.handoff).drain(..).collect()
    }

    /// Records (or clears) the client id of the idle waiter of `queue` while its `BLMOVE` runs.
    pub(crate) fn set_blocked_client(&self, queue: &str, id: Option<i64>) {
        let mut all = lock(&self.blocked_clients);
        all.retain(|(q, _)| q != queue);
        if let Some(id) = id {
            all.push((queue.to_owned(), id));
        }
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

    /// The jobs running right now, one per busy thread.
    pub fn busy(&self) -> Vec<Busy> {
        lock(&self.slots)
            .iter()
            .filter_map(|slot| {
                let s = lock(slot);
                s.current.as_ref().map(|(u, run_at)| Busy {
                    tid: s.tid.clone(),
                    queue: u.queue.clone(),
                    raw: u.raw.clone(),
                    run_at: *run_at,
                })
            })
            .collect()
    }

    /// Takes acknowledgements that have waited longer than `age` (a thread busy with a long job after
    /// finishing short ones) so the heartbeat can write them.
    pub fn take_stale_acks(&self, age: Duration) -> Vec<Unit> {
        let mut out = Vec::new();
        for slot in lock(&self.slots).iter() {
            let mut s = lock(slot);
            if s.oldest_ack.is_some_and(|t| t.elapsed() >= age) {
                out.append(&mut s.acks);
                s.oldest_ack = None;
            }
        }
        out
    }

    /// Takes the newest unstarted job of the sibling holding the most, so a prefetched batch never
    /// waits behind a slow job while another thread of the process is idle. The job stays in its
    /// working list, and its ack names that list, so nothing about its safety changes.
    fn steal(&self, me: &Arc<Mutex<Slot>>) -> Option<Unit> {
        let slots = lock(&self.slots);
        let mut best: Option<(&Arc<Mutex<Slot>>, usize)> = None;
        for slot in slots.iter().filter(|s| !Arc::ptr_eq(s, me)) {
            let held = lock(slot).buffer.len();
            if held > 0 && best.is_none_or(|(_, most)| held > most) {
                best = Some((slot, held));
            }
        }
        best.and_then(|(slot, _)| lock(slot).buffer.pop_back())
    }

    fn register(&self, slot: Arc<Mutex<Slot>>) {
        lock(&self.slots).push(slot);
    }

    fn unregister(&self, slot: &Arc<Mutex<Slot>>) {
        lock(&self.slots).retain(|s| !Arc::ptr_eq(s, slot));
    }
}

/// One processor thread's access to work. Not shared between threads: each owns its connection and
/// drives it on a current-thread runtime of its own (no thread hop per call).
pub struct Fetcher {
    shared: Arc<FetchShared>,
    slot: Arc<Mutex<Slot>>,
    /// This fetcher's working list for each queue, by queue index.
    working: Vec<String>,
    conn: Conn,
    rt: tokio::runtime::Runtime,
    last_empty_fetch: Option<Instant>,
    /// Jobs whose failure could not be filed (Redis was unreachable). They are still in the working
    /// list; they go back to their queue on the next successful round trip.
    stranded: Vec<Unit>,
    /// A fetch whose outcome is unknown (it failed, maybe after Redis ran it): its token and queue
    /// order. The batch it may have moved is claimed before the next fetch.
    unsure: Option<(u64, Vec<usize>)>,
    tid: String,
    closed: bool,
}

impl Fetcher {
    /// A fetcher for the thread `tid`. Registers its working lists in Redis before it takes anything,
    /// so a crash at any later point leaves them where recovery looks.
    pub fn new(shared: Arc<FetchShared>, tid: &str) -> Result<Fetcher> {
        let keys = shared.redis.keys().clone();
        let working: Vec<String> = shared
            .order
            .names()
            .map(|q| keys.working(q, &shared.identity, tid))
            .collect();
        let lists: Vec<(String, String)> = working
            .iter()
            .cloned()
            .zip(shared.order.names().map(str::to_owned))
            .collect();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| Error::Closed(format!("cannot start a runtime: {e}")))?;
        let mut conn = shared.redis.conn();
        rt.block_on(recovery::register(&mut conn, &shared.identity, &lists))?;
        shared.add_working_lists(&lists);
        let slot = Arc::new(Mutex::new(Slot {
            tid: tid.to_owned(),
            ..Slot::default()
        }));
        shared.register(slot.clone());
        Ok(Fetcher {
            shared,
            slot,
            working,
            conn,
            rt,
            last_empty_fetch: None,
            stranded: Vec::new(),
            unsure: None,
            tid: tid.to_owned(),
            closed: false,
        })
    }

    /// The next job if one is already in memory: no I/O, no need to release the GVL.
    pub fn next_buffered(&mut self) -> Option<(String, Vec<u8>)> {
        if self.shared.is_quiet() {
            return None;
        }
        let mut s = lock(&self.slot);
        let unit = s.buffer.pop_front()?;
        Some(start(&mut s, unit))
    }

    /// The next job, waiting up to `timeout` for one. `None` when the wait ran out or the process is
    /// quiet. Blocks: call it with the GVL released.
    pub fn next(&mut self, timeout: Duration) -> Result<Option<(String, Vec<u8>)>> {
        let deadline = Instant::now() + timeout;
        loop {
            if self.shared.is_quiet() {
                return Ok(None);
            }
            if let Some(job) = self.next_buffered() {
                return Ok(Some(job));
            }
            if let Some(unit) = lock(&self.shared.handoff).pop_front() {
                return Ok(Some(start(&mut lock(&self.slot), unit)));
            }
            // Ask Redis when we have acks to write (work is flowing), may have lost a batch, or have
            // not asked for a while.
            let due = !lock(&self.slot).acks.is_empty()
                || self.unsure.is_some()
                || self
                    .last_empty_fetch
                    .is_none_or(|t| t.elapsed() >= IDLE_RECHECK);
            if due {
                let batch = self.fetch_batch(self.shared.max_batch)?;
                if !batch.is_empty() {
                    self.last_empty_fetch = None;
                    lock(&self.slot).buffer.extend(batch);
                    continue;
                }
                self.last_empty_fetch = Some(Instant::now());
            }
            if let Some(unit) = self.shared.steal(&self.slot) {
                return Ok(Some(start(&mut lock(&self.slot), unit)));
            }
            let now = Instant::now();
            if now >= deadline {
                return Ok(None);
            }
            if let Some(unit) = self.park(deadline - now) {
                return Ok(Some(start(&mut lock(&self.slot), unit)));
            }
        }
    }

    /// Waits for an idle waiter to hand over a job.
    fn park(&self, wait: Duration) -> Option<Unit> {
        let shared = &self.shared;
        let mut handoff = lock(&shared.handoff);
        shared.idle_threads.fetch_add(1, Ordering::SeqCst);
        shared.idle_wakeup.notify_waiters();
        let deadline = Instant::now() + wait;
        let unit = loop {
            if let Some(unit) = handoff.pop_front() {
                break Some(unit);
            }
            let now = Instant::now();
            if shared.is_quiet() || now >= deadline {
                break None;
            }
            handoff = shared
                .work_ready
                .wait_timeout(handoff, deadline - now)
                .map(|(guard, _)| guard)
                .unwrap_or_else(|poisoned| poisoned.into_inner().0);
        };
        shared.idle_threads.fetch_sub(1, Ordering::SeqCst);
        unit
    }

    /// One `fetch.lua` call: writes pending acks, takes up to `max` jobs.
    ///
    /// A call that fails may still have run in Redis, its reply lost (Redis stopped or the connection
    /// broke after the script ran): its batch then sits in this fetcher's working list, where nothing
    /// would ever run it while the process lives. So each call carries a token that the script marks
    /// with the batch it took, and after a failure the next call first claims that batch, if the mark
    /// shows the lost call did take one.
    fn fetch_batch(&mut self, max: usize) -> Result<Vec<Unit>> {
        if !self.stranded.is_empty() {
            let stranded = std::mem::take(&mut self.stranded);
            if let Err(e) = self.rt.block_on(requeue(&mut self.conn, &stranded)) {
                self.stranded = stranded;
                return Err(e);
            }
        }
        if let Some((token, order)) = self.unsure.take() {
            let claimed = self.rt.block_on(claim_lost_batch(
                &mut self.conn,
                &self.shared,
                &self.tid,
                token,
                &order,
                &self.working,
            ));
            match claimed {
                Ok(units) if !units.is_empty() => return Ok(units),
                Ok(_) => {}
                Err(e) => {
                    self.unsure = Some((token, order));
                    return Err(e);
                }
            }
        }
        let acks = {
            let mut s = lock(&self.slot);
            s.oldest_ack = None;
            std::mem::take(&mut s.acks)
        };
        let order = self.shared.order.draw();
        let token = self.shared.fetch_tokens.fetch_add(1, Ordering::Relaxed);
        let result = self.rt.block_on(fetch_script(
            &mut self.conn,
            &self.shared,
            &order,
            &self.working,
            &acks,
            max,
            (&self.tid, token),
        ));
        match result {
            Ok(units) => Ok(units),
            Err(e) => {
                if max > 0 {
                    self.unsure = Some((token, order));
                }
                // The acks may not have been written; keep them for the next call (an ack written
                // twice is harmless: LREM finds nothing the second time).
                let mut s = lock(&self.slot);
                let mut acks = acks;
                acks.append(&mut s.acks);
                s.acks = acks;
                s.oldest_ack.get_or_insert_with(Instant::now);
                Err(e)
            }
        }
    }

    /// The running job finished: acknowledge it (written with the next fetch, or by the heartbeat).
    pub fn done(&mut self) {
        let mut s = lock(&self.slot);
        if let Some((unit, _)) = s.current.take() {
            s.acks.push(unit);
            s.oldest_ack.get_or_insert_with(Instant::now);
        }
    }

    /// The running job raised. Files it under Sidekiq's retry rules; returns its fate and the job as
    /// filed (for `sidekiq_retries_exhausted` and death handlers).
    pub fn fail(&mut self, failure: &Failure) -> Result<(Fate, Option<String>)> {
        let Some((unit, _)) = lock(&self.slot).current.take() else {
            return Err(Error::InvalidArgument("no job is running".to_owned()));
        };
        let now = now_f64();
        let (fate, filed) = match Job::parse(&unit.raw) {
            Ok(job) => {
                let plan = retry::plan(job, &unit.queue, failure, now);
                (plan.fate, plan.job.to_json().into_bytes())
            }
            Err(_) => (Fate::Exhausted { morgue: true }, unit.raw.clone()),
        };
        let settled = self
            .rt
            .block_on(settle_failure(&mut self.conn, &unit, &fate, &filed, now));
        if let Err(e) = settled {
            // Not filed: the job is still in its working list. It goes back to its queue with the
            // next successful round trip, and runs again.
            self.stranded.push(unit);
            return Err(e);
        }
        let filed = String::from_utf8(filed).ok();
        Ok((fate, filed))
    }

    /// The running job cannot even be read (invalid JSON, not an object): straight to the dead set as
    /// it is, as Sidekiq does.
    pub fn bury(&mut self) -> Result<()> {
        let Some((unit, _)) = lock(&self.slot).current.take() else {
            return Err(Error::InvalidArgument("no job is running".to_owned()));
        };
        let now = now_f64();
        let fate = Fate::Exhausted { morgue: true };
        let settled =
            self.rt
                .block_on(settle_failure(&mut self.conn, &unit, &fate, &unit.raw, now));
        if settled.is_err() {
            self.stranded.push(unit);
        }
        settled
    }

    /// Writes pending acks and puts every job it holds but did not finish (prefetched ones, and one
    /// started but never settled) back at the head of their queues. The fetcher is unusable afterwards.
    pub fn close(&mut self) -> Result<()> {
        if self.closed {
            return Ok(());
        }
        self.closed = true;
        self.shared.unregister(&self.slot);
        let (acks, mut unstarted) = {
            let mut s = lock(&self.slot);
            // A job started but neither done nor failed (its thread died) goes back first: it is
            // the oldest the fetcher holds.
            let current = s.current.take().map(|(unit, _)| unit);
            let held = current
                .into_iter()
                .chain(s.buffer.drain(..))
                .collect::<Vec<_>>();
            (std::mem::take(&mut s.acks), held)
        };
        unstarted.append(&mut self.stranded);
        let shared = self.shared.clone();
        self.rt.block_on(async {
            if !acks.is_empty() {
                write_acks(&mut self.conn, &shared, &acks).await?;
            }
            requeue(&mut self.conn, &unstarted).await
        })?;
        Ok(())
    }
}

impl Drop for Fetcher {
    fn drop(&mut self) {
        if let Err(e) = self.close() {
            tracing::warn!(error = %e, "fetcher closed with unwritten state; recovery will requeue it");
        }
    }
}

fn start(slot: &mut Slot, unit: Unit) -> (String, Vec<u8>) {
    let job = (unit.queue.clone(), unit.raw.clone());
    let run_at = now_f64() as i64;
    slot.current = Some((unit, run_at));
    job
}

/// `mark`: the fetcher's field in the fetch marks and this call's token.
async fn fetch_script(
    conn: &mut Conn,
    shared: &FetchShared,
    order: &[usize],
    working: &[String],
    acks: &[Unit],
    max: usize,
    mark: (&str, u64),
) -> Result<Vec<Unit>> {
    let keys = shared.redis.keys();
    let script = &*scripts::FETCH;
    let mut inv = script.prepare_invoke();
    inv.key(keys.stat_processed())
        .key(keys.stat_processed_on(&utc_date()))
        .key(keys.fetch_marks(&shared.identity));
    for &q in order {
        inv.key(keys.queue(shared.order.name(q))).key(&working[q]);
    }
    for ack in acks {
        inv.key(&ack.working);
    }
    inv.arg(max)
        .arg(shared.concurrency)
        .arg(order.len())
        .arg(STATS_TTL_SECS)
        .arg(mark.0)
        .arg(mark.1);
    for ack in acks {
        inv.arg(&ack.raw);
    }
    let reply: Vec<Value> = conn.script(&inv).await?;
    let mut items = reply.into_iter();
    let Some(Value::Int(pair)) = items.next() else {
        return Ok(Vec::new());
    };
    let position = usize::try_from(pair - 1)
        .ok()
        .and_then(|p| order.get(p).copied())
        .ok_or_else(|| Error::Redis(format!("fetch returned unknown queue index {pair}")))?;
    let queue = shared.order.name(position).to_owned();
    Ok(items
        .filter_map(|v| match v {
            Value::BulkString(raw) => Some(Unit {
                queue: queue.clone(),
                raw,
                working: working[position].clone(),
            }),
            _ => None,
        })
        .collect())
}

/// The batch a fetch call with `token` moved into this fetcher's working list, if it moved one: the
/// call's reply was lost, so nobody holds those jobs. They are the leftmost of the working list (only
/// this fetcher's fetches push there, and nothing else knows them to remove them); returned oldest
/// first, as the call would have returned them.
async fn claim_lost_batch(
    conn: &mut Conn,
    shared: &FetchShared,
    tid: &str,
    token: u64,
    order: &[usize],
    working: &[String],
) -> Result<Vec<Unit>> {
    let marks = shared.redis.keys().fetch_marks(&shared.identity);
    let mark: Option<String> = conn.cmd(redis::cmd("HGET").arg(&marks).arg(tid)).await?;
    let mut fields = mark
        .as_deref()
        .unwrap_or("")
        .split(' ')
        .map(str::parse::<u64>);
    let (Some(Ok(marked)), Some(Ok(pair)), Some(Ok(count))) =
        (fields.next(), fields.next(), fields.next())
    else {
        return Ok(Vec::new());
    };
    let position = usize::try_from(pair)
        .ok()
        .and_then(|p| p.checked_sub(1))
        .and_then(|p| order.get(p).copied());
    let Some(position) = position.filter(|_| marked == token && count > 0) else {
        return Ok(Vec::new());
    };
    let mut raws: Vec<Vec<u8>> = conn
        .cmd(
            redis::cmd("LRANGE")
                .arg(&working[position])
                .arg(0)
                .arg(count - 1),
        )
        .await?;
    raws.reverse();
    let queue = shared.order.name(position);
    tracing::warn!(
        queue = %queue,
        jobs = raws.len(),
        "a fetch's reply was lost; its jobs are taken from the working list"
    );
    Ok(raws
        .into_iter()
        .map(|raw| Unit {
            queue: queue.to_owned(),
            raw,
            working: working[position].clone(),
        })
        .collect())
}

/// Writes acknowledgements only (a fetch of zero jobs).
pub(crate) async fn write_acks(conn: &mut Conn, shared: &FetchShared, acks: &[Unit]) -> Result<()> {
    for chunk in acks.chunks(500) {
        fetch_script(conn, shared, &[], &[], chunk, 0, ("", 0)).await?;
    }
    Ok(())
}

/// Puts jobs back on the right of their queues (they run next), if their working list still holds them.
pub(crate) async fn requeue(conn: &mut Conn, units: &[Unit]) -> Result<usize> {
    let mut moved = 0;
    let mut groups: Vec<(&str, &str, Vec<&[u8]>)> = Vec::new();
    for u in units {
        match groups
            .iter_mut()
            .find(|(w, q, _)| *w == u.working && *q == u.queue)
        {
            Some(g) => g.2.push(&u.raw),
            None => groups.push((&u.working, &u.queue, vec![&u.raw])),
        }
    }
    for (working, queue, raws) in groups {
        let keys = conn.keys().clone();
        let mut inv = scripts::REQUEUE.prepare_invoke();
        inv.key(working)
            .key(keys.queue(queue))
            .key(keys.queues())
            .arg(queue);
        for raw in raws {
            inv.arg(raw);
        }
        let n: usize = conn.script(&inv).await?;
        moved += n;
    }
    Ok(moved)
}

async fn settle_failure(
    conn: &mut Conn,
    unit: &Unit,
    fate: &Fate,
    filed: &[u8],
    now: f64,
) -> Result<()> {
    let keys = conn.keys().clone();
    let date = utc_date();
    let (action, target, score) = match fate {
        Fate::Retry { at } => ("retry", keys.retry(), *at),
        Fate::Exhausted { morgue: true } => ("dead", keys.dead(), now),
        _ => ("drop", keys.dead(), now),
    };
    let mut inv = scripts::FAIL.prepare_invoke();
    inv.key(&unit.working)
        .key(keys.stat_processed())
        .key(keys.stat_processed_on(&date))
        .key(keys.stat_failed())
        .key(keys.stat_failed_on(&date))
        .key(target)
        .arg(&unit.raw)
        .arg(action)
        .arg(crate::clock::float_string(score))
        .arg(filed)
        .arg(STATS_TTL_SECS)
        .arg(crate::clock::float_string(retry::dead_cutoff(now)))
        .arg(retry::DEAD_MAX_JOBS);
    let _: i64 = conn.script(&inv).await?;
    Ok(())
}
