//! One processor thread's fetcher: its own synchronous connection, its batch, its acknowledgements.
//!
//! Not shared between threads, and never a thread hop: every call runs on the caller's thread (with
//! the GVL released by the binding when it may block). A job's life here:
//! 1. taken in a batch (`fetch.lua`), sized by [`Pace`] to about fifty milliseconds of work;
//! 2. started — from the buffer without any I/O, unless the batch has aged and a higher queue must be
//!    looked at first (then its unstarted jobs may be handed back);
//! 3. acknowledged the moment it finishes: an unreplied `LREM` written to the socket ([`Fetcher::done`])
//!    before the thread starts anything else, so a `kill -9` can only re-run jobs that were running.
//!    The next round trip on the connection confirms it; a connection that broke has it sent again;
//! 4. or filed as failed (`fail.lua`), or put back on its queue when the fetcher closes.

use std::collections::{HashSet, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use redis::Value;

use crate::batch::settle::OkPrefix;
use crate::clock::WallClock;
use crate::dedup::{self, Release};
use crate::error::{Error, Result};
use crate::job_lines::JobLines;
use crate::limits::lease::TokenBatch;
use crate::limits::{self, Held, Outcome};
use crate::link::blocking::{Due, SyncConn};
use crate::liveness;
use crate::metrics::Tally;
use crate::retry::{Failure, Fate};
use crate::settle::Settlement;

mod owed;

use self::owed::{unit_id, OwedMark};
use super::calls::{self, FetchRequest};
use super::pace::{self, Pace};
use super::shared::{lock, Slot};
use super::{FetchShared, Unit};

/// After an empty fetch a parked thread asks Redis again only this often; new work normally reaches
/// it sooner through the idle waiters.
const IDLE_RECHECK: Duration = Duration::from_secs(10);

/// A fetch whose outcome is unknown (it failed, maybe after Redis ran it). The batch it may have
/// moved is claimed before the next fetch; the jobs it was to hand back are ours again if it did not.
#[derive(Debug)]
struct Unsure {
    token: u64,
    queues: Vec<(usize, usize)>,
    returns: Vec<Unit>,
    /// Acks the call counted in the stats.
    counted: u64,
}

/// What a fetch call did.
enum Fetched {
    /// A batch, oldest first; any jobs offered back went back to their queues.
    Batch(Vec<Unit>),
    /// Nothing to take; the jobs offered back are still ours.
    Nothing(Vec<Unit>),
}

pub struct Fetcher {
    shared: Arc<FetchShared>,
    slot: Arc<Mutex<Slot>>,
    /// This fetcher's working list for each queue, by queue index.
    working: Vec<String>,
    conn: SyncConn,
    pace: Pace,
    /// When the running job started, to time it.
    started: Option<Instant>,
    /// The wall clock as the monotonic one gives it: the minute a finished job counts under, and
    /// the time job lines give its start.
    wall: WallClock,
    /// Unreplied writes (acks, key releases) since the last round trip that succeeded, one packet
    /// after another: sent again if the connection broke. One buffer, kept: an ack allocates
    /// nothing.
    unconfirmed: Vec<u8>,
    /// Unreplied writes not made yet (no connection); made before the next call.
    unsent: Vec<u8>,
    /// Where an ack's packet is built before it is written (kept, like `unconfirmed`).
    packet: Vec<u8>,
    /// The running job's deduplication key, released with its ack (`until_executed`).
    release: Option<Release>,
    /// The concurrency slot the running job holds (`limits`), given back when it settles.
    limit_slot: Option<Held>,
    /// A leased slot the last job of its limit held, kept for this thread's next job if that job
    /// is of the same class (`kept_class`): its limit check takes it without the leases' lock. A
    /// job of another class gives it back as it starts, as do a fetch and the fetcher's close
    /// (`give_back_kept`), so it never waits through another job.
    kept: Option<Held>,
    /// The `class` (as written in its JSON) of the job whose slot is `kept`.
    kept_class: Vec<u8>,
    /// Rate tokens taken from the process's lease for this thread's next jobs.
    tokens: Option<TokenBatch>,
    /// Classes whose jobs release their key as they start (`until_executing`), learnt from
    /// [`Fetcher::dedup`]: the buffered jobs of one have their keys released together, in one script
    /// call, when their batch arrives (`release_buffered_early`), and are marked
    /// [`Unit::key_released`], so that their start has nothing left to do.
    early: HashSet<String>,
    /// A batch's dirty mark this fetcher's acks left out (`owed.rs`), with the job that will write
    /// it.
    owed_mark: Option<OwedMark>,
    /// Acknowledged jobs not yet counted in `stat:processed`.
    uncounted: u64,
    last_empty_fetch: Option<Instant>,
    /// The last batch validity answer this fetcher used: bid, valid, when it was read.
    last_validity: Option<(String, bool, Instant)>,
    /// Jobs whose failure could not be filed (Redis was unreachable). They are still in the working
    /// list; they go back to their queue on the next successful round trip.
    stranded: Vec<Unit>,
    unsure: Option<Unsure>,
    /// Sidekiq's per-job log lines (`job_lines.rs`), when they are on.
    lines: JobLines,
    /// This thread's Prometheus counts (`metrics`), flushed by the liveness beat.
    tally: Arc<Mutex<Tally>>,
    tid: String,
    closed: bool,
    /// The success record's command up to the jid, for the batch whose job this fetcher acked last.
    ok_prefix: OkPrefix,
    /// The bytes an ack starts with ([`calls::AckHead`]).
    ack_head: calls::AckHead,
}

/// Bytes of a kept write buffer (`unconfirmed`, `packet`) kept for the next writes; past it (a big
/// job's ack) the rest is given back.
const UNCONFIRMED_KEPT: usize = 256 * 1024;

fn give_back_if_big(buffer: &mut Vec<u8>) {
    if buffer.capacity() > UNCONFIRMED_KEPT {
        buffer.shrink_to(UNCONFIRMED_KEPT);
    }
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
        let mut conn = SyncConn::holding(&shared.redis);
        if let Some(cmd) = liveness::register_cmd(&keys, &shared.identity, &lists) {
            conn.cmd::<i64>(&cmd)?;
        }
        shared.add_working_lists(&lists);
        let slot = Arc::new(Mutex::new(Slot {
            tid: tid.to_owned(),
            ..Slot::default()
        }));
        shared.register(slot.clone());
        let tally = shared.metrics.tally();
        Ok(Fetcher {
            pace: Pace::plain(shared.order.len(), shared.max_batch),
            shared,
            slot,
            working,
            conn,
            started: None,
            wall: WallClock::default(),
            unconfirmed: Vec::new(),
            unsent: Vec::new(),
            packet: Vec::new(),
            release: None,
            limit_slot: None,
            kept: None,
            kept_class: Vec::new(),
            tokens: None,
            early: HashSet::new(),
            owed_mark: None,
            uncounted: 0,
            last_empty_fetch: None,
            stranded: Vec::new(),
            last_validity: None,
            unsure: None,
            lines: JobLines::new(tid),
            tally,
            tid: tid.to_owned(),
            closed: false,
            ok_prefix: OkPrefix::default(),
            ack_head: calls::AckHead::default(),
        })
    }

    /// The next job if one is already in memory and may start now: no I/O, no need to release the
    /// GVL. `None` also when the batch must first look at the higher queues ([`Fetcher::next`] does).
    pub fn next_buffered(&mut self) -> Option<(String, Vec<u8>)> {
        self.start_buffered().then(|| self.running_copy()).flatten()
    }

    /// [`Fetcher::next_buffered`] without copying the job out: true when a job started, which
    /// [`Fetcher::with_running`] then reads in place.
    pub fn start_buffered(&mut self) -> bool {
        let started = self.try_start_buffered();
        if !started.is_some_and(|front| self.owes_for(front)) {
            self.pay_mark();
        }
        started.is_some()
    }

    /// Starts the job at the front of the buffer if it may start now; returns its identity
    /// ([`unit_id`]).
    fn try_start_buffered(&mut self) -> Option<usize> {
        if self.shared.is_quiet() {
            return None;
        }
        let mut s = lock(&self.slot);
        let index = s.buffer.front()?.index;
        // One clock read serves the look-up's age and the job's start.
        let now = Instant::now();
        if self.shared.paused.is_paused(index)
            || self.pace.look_up_due(index, &self.shared.order, now)
        {
            return None;
        }
        let unit = s.buffer.pop_front()?;
        // An owed mark's job is running now: it is no longer in the buffer to keep.
        s.owes_mark = false;
        let id = unit_id(&unit);
        let kept_waits = self.kept.is_some() && !same_class(&unit, &self.kept_class);
        start(
            &mut s,
            &mut self.started,
            &self.lines,
            &mut self.wall,
            unit,
            now,
        );
        drop(s);
        if kept_waits {
            self.give_back_kept_slot();
        }
        Some(id)
    }

    /// Whether batch `bid` is valid, when it was read less than a second ago (no I/O). The last
    /// answer is kept here too, with when it was read: a batch's jobs come together, and then the
    /// shared answers' lock and map are not needed. Asked as a job starts, whose start time serves
    /// as the time now (no clock read); `bid` as bytes, compared as they are.
    pub fn batch_valid_cached(&mut self, bid: &[u8]) -> Option<bool> {
        let now = self.started.unwrap_or_else(Instant::now);
        if let Some((last, valid, at)) = &self.last_validity {
            if last.as_bytes() == bid
                && now.saturating_duration_since(*at) < crate::batch::validity::TTL
            {
                return Some(*valid);
            }
        }
        let bid = std::str::from_utf8(bid).ok()?;
        let (valid, at) = self.shared.batch_validity.cached_at(bid, now)?;
        self.last_validity = Some((bid.to_owned(), valid, at));
        Some(valid)
    }

    /// Whether batch `bid` is valid: the answer of the last second, or one round trip. Call it
    /// with the GVL released.
    pub fn batch_valid(&mut self, bid: &str) -> Result<bool> {
        if let Some(valid) = self.batch_valid_cached(bid.as_bytes()) {
            return Ok(valid);
        }
        let valid = self.round_trip(|conn| crate::batch::store::valid(conn, bid))?;
        self.shared
            .batch_validity
            .remember(bid, valid, Instant::now());
        Ok(valid)
    }

    /// `f` of the running job (its queue and bytes are in the [`Unit`]), read in place; `None` when
    /// no job is running.
    pub fn with_running<R>(&self, f: impl FnOnce(&Unit) -> R) -> Option<R> {
        lock(&self.slot).current.as_ref().map(|(unit, _)| f(unit))
    }

    fn running_copy(&self) -> Option<(String, Vec<u8>)> {
        self.with_running(|unit| (unit.queue.to_string(), unit.raw.clone()))
    }

    /// The next job, waiting up to `timeout` for one. `None` when the wait ran out or the process is
    /// quiet. Blocks: call it with the GVL released.
    pub fn next(&mut self, timeout: Duration) -> Result<Option<(String, Vec<u8>)>> {
        Ok(self
            .start_next(timeout)?
            .then(|| self.running_copy())
            .flatten())
    }

    /// [`Fetcher::next`] without copying the job out: true when a job started (read it with
    /// [`Fetcher::with_running`]). Blocks: call it with the GVL released.
    pub fn start_next(&mut self, timeout: Duration) -> Result<bool> {
        // What follows may take the buffer's front away or wait: an owed mark goes out first, and
        // a slot kept for a next job of its limit goes back.
        self.pay_mark();
        self.give_back_kept();
        let deadline = Instant::now() + timeout;
        loop {
            if self.shared.is_quiet() {
                return Ok(false);
            }
            self.recover_leftovers()?;
            self.hand_back_paused()?;
            self.look_up_if_due()?;
            if self.start_buffered() {
                return Ok(true);
            }
            if let Some(unit) = self.shared.try_handoff() {
                if self.begin_unless_paused(unit) {
                    return Ok(true);
                }
                continue;
            }
            if self.fetch_due() {
                match self.fetch_batch()? {
                    Fetched::Batch(batch) if !batch.is_empty() => {
                        self.last_empty_fetch = None;
                        self.pace.taken(Instant::now());
                        lock(&self.slot).buffer.extend(batch);
                        self.release_buffered_early(None);
                        continue;
                    }
                    _ => self.last_empty_fetch = Some(Instant::now()),
                }
            }
            if let Some(unit) = self.shared.steal(&self.slot) {
                self.begin(unit);
                return Ok(true);
            }
            let now = Instant::now();
            if now >= deadline {
                return Ok(false);
            }
            if let Some(unit) = self.shared.park(deadline - now) {
                if self.begin_unless_paused(unit) {
                    return Ok(true);
                }
                continue;
            }
        }
    }

    /// Whether an empty buffer should ask Redis: work was flowing, something is left to settle, or
    /// the idle re-check is due.
    fn fetch_due(&self) -> bool {
        self.uncounted > 0
            || !self.unsent.is_empty()
            || self
                .last_empty_fetch
                .is_none_or(|t| t.elapsed() >= IDLE_RECHECK)
    }

    /// Starts a job an idle waiter handed over, unless its queue was paused since: then it joins the
    /// buffer, which hands it back (`hand_back_paused`) on the next turn.
    fn begin_unless_paused(&mut self, unit: Unit) -> bool {
        if self.shared.paused.is_paused(unit.index) {
            lock(&self.slot).buffer.push_back(unit);
            return false;
        }
        self.begin(unit);
        true
    }

    fn begin(&mut self, unit: Unit) {
        if self.kept.is_some() && !same_class(&unit, &self.kept_class) {
            self.give_back_kept_slot();
        }
        let now = Instant::now();
        start(
            &mut lock(&self.slot),
            &mut self.started,
            &self.lines,
            &mut self.wall,
            unit,
            now,
        );
    }

    /// The running job finished. Its acknowledgement is written now, without waiting for a reply;
    /// if it cannot be written (no connection) it is written before the next call, and until then
    /// the job is safe in its working list.
    pub fn done(&mut self) {
        self.done_as(None);
    }

    /// [`Fetcher::done`], with the class the job counts under in the metrics when the caller
    /// already read it (`wrapped`, else `class`, as [`crate::metrics::tally::job_class`] reads them).
    pub fn done_as(&mut self, class: Option<&str>) {
        let Some((unit, _)) = lock(&self.slot).current.take() else {
            return;
        };
        if let Some(started) = self.started.take() {
            // One clock read times the job and dates it for Sidekiq's Metrics page.
            let now = Instant::now();
            let elapsed = now.saturating_duration_since(started);
            self.pace.record(unit.index, elapsed);
            self.lines.done(&unit.raw, elapsed);
            let mut tally = lock(&self.tally);
            let minute = tally.by_minute().then(|| self.wall.minute(now));
            tally.record_at(unit.index, &unit.raw, class, elapsed, true, minute);
        }
        self.uncounted += 1;
        let keep = self.note_kept_class(&unit);
        self.acknowledge(unit);
        self.release_limit_slot(keep);
    }

    /// The running job was not run: its `expires_at` had passed (`expires_in`). It is acknowledged
    /// as `done` acknowledges (its idempotency key released likewise), logged `expired` and counted
    /// as expired: not processed, and not timed for the batch pace.
    pub fn expired(&mut self) {
        let Some((unit, _)) = lock(&self.slot).current.take() else {
            return;
        };
        if let Some(started) = self.started.take() {
            self.lines.expired(&unit.raw, started.elapsed());
        }
        lock(&self.tally).record_expired(unit.index, &unit.raw);
        self.acknowledge(unit);
    }

    /// Writes the acknowledgement of a finished `unit`: a bare `LREM`, or the release script when
    /// the job's idempotency key is released with its end.
    fn acknowledge(&mut self, mut unit: Unit) {
        // A job of a batch (batch/): its ack records it for the batch checker first, and wakes
        // this process's checker. Like a bare ack it only confirms this thread's work, so it may
        // wait for the thread's next call (within a batch's ~50 ms of work, or the kernel's ~200 ms
        // hold).
        let mut packet = std::mem::take(&mut self.packet);
        packet.clear();
        let in_batch = match unit.batch.take() {
            Some(member) => {
                let mark = self.settle_mark(&member);
                let keys = self.shared.redis.keys();
                member.ack_packet(
                    &mut packet,
                    keys,
                    &unit,
                    mark,
                    &mut self.ok_prefix,
                    &mut self.ack_head,
                );
                self.write_unreplied(&packet, Due::WithNextCall);
                crate::batch::checker::wake();
                true
            }
            None => false,
        };
        // A released key admits the next push of its job, so it goes out now. A bare ack only
        // confirms what this thread did, and may wait for the thread's next call.
        match self.release.take() {
            Some(release) => {
                let keys = self.shared.redis.keys();
                let script = dedup::unreplied(&release.command(keys, &unit, true, true, false));
                self.write_unreplied(&script, Due::Now);
            }
            None if in_batch => {}
            None => {
                calls::ack_command(&mut packet, &mut self.ack_head, &unit);
                self.write_unreplied(&packet, Due::WithNextCall);
            }
        }
        give_back_if_big(&mut packet);
        self.packet = packet;
    }

    /// Writes a packet whose reply is switched off, now if the connection is open, else before the
    /// next call. Its bytes are kept in `unconfirmed` (or `unsent`) until a round trip confirms them.
    fn write_unreplied(&mut self, packet: &[u8], due: Due) {
        if self.unsent.is_empty() && self.conn.send_unreplied(packet, due).is_ok() {
            self.unconfirmed.extend_from_slice(packet);
        } else {
            self.unsent.extend_from_slice(packet);
        }
    }

    /// Forgets the confirmed writes, keeping the buffer unless a big job made it big.
    fn clear_unconfirmed(&mut self) {
        self.unconfirmed.clear();
        give_back_if_big(&mut self.unconfirmed);
    }

    /// Releases, now and in one script call, the keys of `first` (the running job's, when its class
    /// was just learnt) and of the buffered jobs whose class releases its key as a job starts
    /// (`early`) and whose keys have not gone out yet. Called when a batch arrives and when a class
    /// is learnt. Only the jobs at the front of the buffer that make about 2 ms of work
    /// ([`Pace::early_window`]; a batch may hold ~50 ms): the others release their key as they
    /// start, one write each. So a key goes out at most ~2 ms before its job starts; one that a
    /// sibling steals, or that a higher queue's look-up hands back, has merely had its key released
    /// early: a duplicate pushed meanwhile runs once more, never once less.
    fn release_buffered_early(&mut self, first: Option<Release>) {
        let mut releases: Vec<Release> = first.into_iter().collect();
        if !self.early.is_empty() {
            let mut slot = lock(&self.slot);
            let window = slot
                .buffer
                .front()
                .map_or(0, |u| self.pace.early_window(u.index));
            for unit in slot
                .buffer
                .iter_mut()
                .take(window)
                .filter(|u| !u.key_released)
            {
                let Some((key, jid, class)) = dedup::plain_holder(&unit.raw) else {
                    continue;
                };
                if self.early.contains(&class) {
                    releases.push(Release {
                        key,
                        jid,
                        ttl: 0,
                        reschedule: false,
                    });
                    unit.key_released = true;
                }
            }
        }
        if !releases.is_empty() {
            let packet = dedup::unreplied(&dedup::start_command(&releases));
            self.write_unreplied(&packet, Due::Now);
        }
    }

    /// Whether the running job's idempotency key already went out with its batch: then it needs no
    /// [`Fetcher::dedup`] call as it starts.
    pub fn running_key_released(&self) -> bool {
        lock(&self.slot)
            .current
            .as_ref()
            .is_some_and(|(unit, _)| unit.key_released)
    }

    /// The running job is deduplicated (it carries `idempotency_key`). `until_executed`: its key is
    /// released with its acknowledgement or failure; otherwise now, before it starts (an unreplied
    /// write). With `read`, the positions kept beside the key are fetched (one round trip) and
    /// returned merged with the job's own `wal_locations`, newest wins.
    pub fn dedup(
        &mut self,
        release: Release,
        until_executed: bool,
        read: bool,
    ) -> Result<Option<Vec<(String, String)>>> {
        if !read {
            let (released, class) = {
                let slot = lock(&self.slot);
                let Some((unit, _)) = slot.current.as_ref() else {
                    return Err(Error::InvalidArgument("no job is running".to_owned()));
                };
                let learn = !until_executed && !unit.key_released;
                let class = learn.then(|| dedup::plain_holder(&unit.raw)).flatten();
                (unit.key_released, class.map(|(_, _, class)| class))
            };
            if until_executed {
                self.release = Some(release);
            } else if !released {
                // A class learnt now, or a job of a known one that was beyond the last early
                // window: the buffered jobs of the next window go out in the same call.
                if let Some(class) = class {
                    self.early.insert(class);
                    self.release_buffered_early(Some(release));
                } else {
                    let packet = dedup::unreplied(&dedup::start_command(&[release]));
                    self.write_unreplied(&packet, Due::Now);
                }
            }
            return Ok(None);
        }
        let Some(unit) = lock(&self.slot).current.as_ref().map(|(u, _)| u.clone()) else {
            return Err(Error::InvalidArgument("no job is running".to_owned()));
        };
        let cmd = release.command(
            self.shared.redis.keys(),
            &unit,
            !until_executed,
            false,
            read,
        );
        if until_executed {
            self.release = Some(release);
        }
        let kept: Vec<String> = self.round_trip(|c| c.cmd(&cmd))?;
        Ok(Some(dedup::merge_positions(&unit.raw, &kept)))
    }

    /// Checks the running job's concurrency and rate limits (`limits`) before it starts: one
    /// round trip. On [`Outcome::Run`] it holds its slot until it settles; otherwise it has left the
    /// working list (deferred, or in `schedule` for later) and is no longer this fetcher's: not
    /// counted, not timed. If Redis cannot be reached the job goes back to its queue with the next
    /// successful round trip, unrun; any other error leaves it running, to be filed as failed.
    pub fn limit(&mut self, req: &limits::Request) -> Result<Outcome> {
        if let Some(outcome) = self.limit_leased(req) {
            return Ok(outcome);
        }
        let Some(unit) = lock(&self.slot).current.as_ref().map(|(u, _)| u.clone()) else {
            return Err(Error::InvalidArgument("no job is running".to_owned()));
        };
        let leases = &self.shared.leases;
        let ask = leases.ask(req, self.shared.concurrency);
        let inv = limits::acquire_invocation(
            self.shared.redis.keys(),
            &self.shared.identity,
            &unit,
            req,
            &ask,
        );
        let asked = Instant::now();
        let reply = self.round_trip(|c| c.script::<Vec<String>>(&inv));
        let outcome = reply.and_then(limits::outcome_granted).map(|(o, granted)| {
            if o == Outcome::Run {
                let leases = &self.shared.leases;
                let identity = &self.shared.identity;
                leases.granted(req, identity, &ask, granted.slots, granted.tokens, asked);
            }
            o
        });
        match &outcome {
            Ok(Outcome::Run) => {
                // Timed from here: the pace sizes batches by the jobs' own work, not the check.
                self.started = Some(Instant::now());
                self.limit_slot = req.concurrency.as_ref().map(|(lkey, _)| Held {
                    lkey: Arc::from(lkey.as_str()),
                    jid: req.jid.clone(),
                    lease: None,
                });
            }
            Ok(held_back) => {
                if let (Outcome::Deferred, Some((lkey, _))) = (held_back, &req.concurrency) {
                    self.shared.leases.contended(lkey);
                }
                tracing::debug!(class = %req.class, jid = %req.jid, outcome = ?held_back, "job held back by its limit");
                if let Some(started) = self.started {
                    self.lines.deferred(&unit.raw, started.elapsed());
                }
                self.let_go_unrun();
            }
            Err(e) if e.is_connection() => {
                if let Some(unit) = self.let_go_unrun() {
                    self.stranded.push(unit);
                }
            }
            // Redis refused the script (a limit's key holding another type): the job stays running,
            // so the caller files it as failed with this error.
            Err(_) => {}
        }
        outcome
    }

    /// The running job's limits checked against what the process leased, in memory: `Some(Run)` if
    /// the leases cover it (no Redis call), `None` to ask Redis. Also what the binding tries before
    /// it releases the GVL for [`Fetcher::limit`].
    pub fn limit_leased(&mut self, req: &limits::Request) -> Option<Outcome> {
        let conc = req.concurrency.as_ref().map(|(k, c)| (k.as_str(), *c));
        let rkey = req.rate.as_ref().map(|r| r.key.as_str());
        self.limit_leased_keys(conc, rkey)
    }

    /// [`Fetcher::limit_leased`] by the limits' keys alone: the concurrency limit's key and limit,
    /// the rate limit's key. The slot is the one this thread kept from its last job of the limit
    /// when it can be, and the token comes from the thread's [`TokenBatch`]: a job of a limit that
    /// does not bind then takes neither lock nor look-up. Its start serves as the time now (the
    /// check takes no time worth a clock read), and a running job has one.
    pub fn limit_leased_keys(
        &mut self,
        conc: Option<(&str, u64)>,
        rkey: Option<&str>,
    ) -> Option<Outcome> {
        let now = self.started?;
        let kept = self.kept.take();
        let slot = match conc {
            None => {
                self.give_back_opt(kept);
                None
            }
            Some((lkey, cap)) => match kept {
                Some(held) if keeps(&held, lkey, cap) => Some(held),
                other => {
                    self.give_back_opt(other);
                    Some(self.shared.leases.take_slot(lkey, cap, now)?)
                }
            },
        };
        if let Some(rkey) = rkey {
            if !self.spend_token(rkey, now) {
                // Not covered after all: the job asks Redis for both, and the slot goes back.
                self.give_back_opt(slot);
                return None;
            }
        }
        self.limit_slot = slot;
        Some(Outcome::Run)
    }

    /// Spends a token of the rate limit `rkey`: from this thread's batch, else from a new batch
    /// taken from the lease (the old one's tokens, of another limit, go back to theirs).
    fn spend_token(&mut self, rkey: &str, now: Instant) -> bool {
        if self.tokens.as_mut().is_some_and(|t| t.spend(rkey, now)) {
            return true;
        }
        let leases = &self.shared.leases;
        if let Some(old) = self.tokens.take() {
            leases.return_tokens(old);
        }
        let Some(mut batch) = leases.take_tokens(rkey, now) else {
            return false;
        };
        let spent = batch.spend(rkey, now);
        self.tokens = Some(batch);
        spent
    }

    /// The running job will not run here now: forgotten without an acknowledgement (its idempotency
    /// key, if held until executed, stays with it).
    fn let_go_unrun(&mut self) -> Option<Unit> {
        self.started = None;
        self.release = None;
        lock(&self.slot).current.take().map(|(unit, _)| unit)
    }

    /// Whether the concurrency slot of `unit`, which just ran, may be kept for this thread's next
    /// job: leased, no job of its limit waiting, and the job's class readable, which is noted.
    fn note_kept_class(&mut self, unit: &Unit) -> bool {
        let leased = self.limit_slot.as_ref().and_then(|h| h.lease.as_ref());
        if leased.is_none_or(|l| l.contended()) {
            return false;
        }
        let Some(class) = class_bytes(unit) else {
            return false;
        };
        self.kept_class.clear();
        self.kept_class.extend_from_slice(class);
        true
    }

    /// The concurrency slot of the job that just settled: kept for this thread's next job (`keep`,
    /// from [`Fetcher::note_kept_class`]), else given back. A slot kept from an earlier job that
    /// this one did not use goes back first.
    fn release_limit_slot(&mut self, keep: bool) {
        self.give_back_kept_slot();
        let Some(held) = self.limit_slot.take() else {
            return;
        };
        if keep {
            self.kept = Some(held);
            return;
        }
        self.give_back(held);
    }

    /// Gives back the slot kept for a next job that did not come (a fetch, the fetcher's close),
    /// and the rate tokens taken for them.
    fn give_back_kept(&mut self) {
        self.give_back_kept_slot();
        if let Some(tokens) = self.tokens.take() {
            self.shared.leases.return_tokens(tokens);
        }
    }

    fn give_back_kept_slot(&mut self) {
        let kept = self.kept.take();
        self.give_back_opt(kept);
    }

    fn give_back_opt(&mut self, held: Option<Held>) {
        if let Some(held) = held {
            self.give_back(held);
        }
    }

    /// Gives `held` back: to the process's lease, in memory, when it is leased and the lease
    /// takes it; else through Redis (an unreplied write, sent at once so a deferred job can take
    /// it).
    fn give_back(&mut self, held: Held) {
        let held = match held.lease {
            Some(_) => match self.shared.leases.give(held) {
                None => return,
                Some(back) => back,
            },
            None => held,
        };
        let packet = limits::release_packet(self.shared.redis.keys(), &self.shared.identity, &held);
        self.write_unreplied(&packet, Due::Now);
    }

    /// Bytes of the running job: a large acknowledgement may have to wait for socket space, so the
    /// binding releases the GVL around [`Fetcher::done`] past some size.
    pub fn running_len(&self) -> usize {
        lock(&self.slot)
            .current
            .as_ref()
            .map_or(0, |(u, _)| u.raw.len())
    }

    /// The running job raised. Files it under Sidekiq's retry rules; returns its fate and the job as
    /// filed (for `sidekiq_retries_exhausted` and death handlers).
    pub fn fail(&mut self, failure: &Failure) -> Result<(Fate, Option<String>)> {
        let unit = self.finish_running()?;
        let settlement = Settlement::of_failure(&unit, failure);
        let release = self.release.take();
        self.file(unit, &settlement, release.as_ref(), Some(failure))?;
        Ok((settlement.fate, String::from_utf8(settlement.filed).ok()))
    }

    /// The running job cannot even be read (invalid JSON, not an object): straight to the dead set as
    /// it is, as Sidekiq does.
    pub fn bury(&mut self) -> Result<()> {
        let unit = self.finish_running()?;
        let settlement = Settlement::burial(&unit);
        let release = self.release.take();
        self.file(unit, &settlement, release.as_ref(), None)
    }

    fn finish_running(&mut self) -> Result<Unit> {
        let Some((unit, _)) = lock(&self.slot).current.take() else {
            return Err(Error::InvalidArgument("no job is running".to_owned()));
        };
        if let Some(started) = self.started.take() {
            let elapsed = started.elapsed();
            self.pace.record(unit.index, elapsed);
            self.lines.fail(&unit.raw, elapsed);
            lock(&self.tally).record(unit.index, &unit.raw, elapsed, false);
        }
        self.release_limit_slot(false);
        Ok(unit)
    }

    fn file(
        &mut self,
        unit: Unit,
        settlement: &Settlement,
        release: Option<&Release>,
        failure: Option<&Failure>,
    ) -> Result<()> {
        let keys = self.shared.redis.keys();
        // A job of a batch (batch/) is counted by a prelude in the same script.
        let batch = unit
            .batch
            .as_ref()
            .filter(|m| m.counts_failure(&settlement.fate));
        let mut inv = match batch {
            Some(_) => settlement.invocation_of(&crate::scripts::BATCH_FAIL, keys, &unit),
            None => settlement.invocation(keys, &unit),
        };
        if let Some(release) = release {
            let retried = matches!(settlement.fate, Fate::Retry { .. });
            release.extend_fail(&mut inv, keys, &unit, !retried);
        }
        if let Some(member) = &batch {
            member.extend_fail(&mut inv, keys, &settlement.fate, failure);
        }
        if let Err(e) = self.round_trip(|c| c.script::<i64>(&inv)) {
            // Not filed: the job is still in its working list. It goes back to its queue with the
            // next successful round trip, and runs again.
            self.stranded.push(unit);
            return Err(e);
        }
        Ok(())
    }

    /// Writes pending acks and puts every job it holds but did not finish (prefetched ones, and one
    /// started but never settled) back at the head of their queues. Attempts every step; returns the
    /// first error. The fetcher is unusable afterwards.
    pub fn close(&mut self) -> Result<()> {
        if self.closed {
            return Ok(());
        }
        self.closed = true;
        self.pay_mark();
        self.shared.unregister(&self.slot);
        let mut held: Vec<Unit> = {
            let mut s = lock(&self.slot);
            // A job started but neither done nor failed (its thread died) goes back first: it is
            // the oldest the fetcher holds.
            let current = s.current.take().map(|(unit, _)| unit);
            current.into_iter().chain(s.buffer.drain(..)).collect()
        };
        self.release_limit_slot(false);
        self.give_back_kept();
        held.append(&mut self.stranded);
        let mut first_error = None;
        if let Some(unsure) = self.unsure.take() {
            // Put back either way: requeue.lua moves a job only if the working list still holds it.
            held.extend(unsure.returns.iter().cloned());
            match self.claim(&unsure) {
                Ok(lost) => {
                    if lost.ran {
                        self.uncounted -= unsure.counted;
                    }
                    held.extend(lost.batch);
                }
                Err(e) => first_error = first_error.or(Some(e)),
            }
        }
        if let Err(e) = self.round_trip(|c| calls::requeue_sync(c, &held)) {
            first_error = first_error.or(Some(e));
        }
        if let Err(e) = self.call_fetch(&[], Vec::new()) {
            first_error = first_error.or(Some(e));
        }
        first_error.map_or(Ok(()), Err)
    }

    /// Settles what an earlier failure left: jobs to requeue, a fetch whose reply was lost.
    fn recover_leftovers(&mut self) -> Result<()> {
        if !self.stranded.is_empty() {
            let stranded = std::mem::take(&mut self.stranded);
            if let Err(e) = self.round_trip(|c| calls::requeue_sync(c, &stranded)) {
                self.stranded = stranded;
                return Err(e);
            }
        }
        if let Some(unsure) = self.unsure.take() {
            match self.claim(&unsure) {
                Ok(lost) if !lost.batch.is_empty() => {
                    // The lost call ran: it counted its acks, took this batch and handed the
                    // returns back.
                    self.uncounted -= unsure.counted;
                    self.pace.taken(Instant::now());
                    self.last_empty_fetch = None;
                    lock(&self.slot).buffer.extend(lost.batch);
                    self.release_buffered_early(None);
                }
                Ok(lost) => {
                    if lost.ran {
                        self.uncounted -= unsure.counted;
                    }
                    prepend(&mut lock(&self.slot).buffer, unsure.returns);
                }
                Err(e) => {
                    self.unsure = Some(unsure);
                    return Err(e);
                }
            }
        }
        Ok(())
    }

    fn claim(&mut self, unsure: &Unsure) -> Result<calls::LostCall> {
        let (shared, tid, working) = (self.shared.clone(), self.tid.clone(), self.working.clone());
        self.round_trip(|c| {
            calls::claim_lost_batch(c, &shared, &tid, unsure.token, &unsure.queues, &working)
        })
    }

    /// Hands the unstarted jobs of paused queues (`pause.rs`) back to the head of their queues, in
    /// the order they would have run: one round trip, only when a queue this fetcher holds jobs of
    /// was paused. If it fails they are still in the working list and go back with the next
    /// successful round trip.
    fn hand_back_paused(&mut self) -> Result<()> {
        let back: Vec<Unit> = {
            let mut s = lock(&self.slot);
            let paused = |u: &Unit| self.shared.paused.is_paused(u.index);
            if !s.buffer.iter().any(paused) {
                return Ok(());
            }
            let (back, keep): (VecDeque<Unit>, VecDeque<Unit>) =
                s.buffer.drain(..).partition(paused);
            s.buffer = keep;
            Vec::from(back)
        };
        tracing::debug!(
            jobs = back.len(),
            "queue paused; unstarted jobs handed back"
        );
        if let Err(e) = self.round_trip(|c| calls::requeue_sync(c, &back)) {
            self.stranded.extend(back);
            return Err(e);
        }
        Ok(())
    }

    /// Before a buffered job starts: if its batch has aged, look at the queues that outrank it, and
    /// if one has work take it instead, handing the unstarted jobs back.
    fn look_up_if_due(&mut self) -> Result<()> {
        let Some(index) = lock(&self.slot).buffer.front().map(|u| u.index) else {
            return Ok(());
        };
        let now = Instant::now();
        if !self.pace.look_up_due(index, &self.shared.order, now) {
            return Ok(());
        }
        self.pace.taken(now);
        let ahead = pace::outranking(&self.shared.order, index);
        if ahead.is_empty() {
            return Ok(());
        }
        let queues: Vec<(usize, usize)> =
            ahead.iter().map(|&q| (q, self.pace.batch_for(q))).collect();
        let returns: Vec<Unit> = lock(&self.slot).buffer.drain(..).collect();
        match self.call_fetch(&queues, returns)? {
            Fetched::Batch(batch) => {
                tracing::debug!(
                    jobs = batch.len(),
                    "a higher queue has work; unstarted jobs handed back"
                );
                lock(&self.slot).buffer.extend(batch);
                self.release_buffered_early(None);
            }
            Fetched::Nothing(returns) => prepend(&mut lock(&self.slot).buffer, returns),
        }
        Ok(())
    }

    /// A fetch for an empty buffer, in this fetch's queue order.
    fn fetch_batch(&mut self) -> Result<Fetched> {
        let queues: Vec<(usize, usize)> = self
            .shared
            .order
            .draw()
            .into_iter()
            .map(|q| (q, self.pace.batch_for(q)))
            .collect();
        self.call_fetch(&queues, Vec::new())
    }

    /// One `fetch.lua` call. A call that fails may still have run in Redis, its reply lost (Redis
    /// stopped or the connection broke after the script ran): its batch then sits in this fetcher's
    /// working list, where nothing would ever run it while the process lives. So each call carries a
    /// token that the script marks with the batch it took, and after a failure the next call first
    /// claims that batch, if the mark shows the lost call did take one.
    fn call_fetch(&mut self, queues: &[(usize, usize)], returns: Vec<Unit>) -> Result<Fetched> {
        let token = self.shared.next_token();
        let counted = self.uncounted;
        let tid = self.tid.clone();
        let req = FetchRequest {
            queues,
            returns: &returns,
            counted,
            mark: (&tid, token),
        };
        let inv = calls::fetch_invocation(&self.shared, &self.working, &req);
        match self.round_trip(|c| c.script::<Vec<Value>>(&inv)) {
            Ok(reply) => {
                self.uncounted -= counted;
                let batch = calls::fetched_units(&self.shared, &self.working, &req, reply)?;
                if !batch.is_empty() {
                    tracing::debug!(
                        tid = %self.tid,
                        jobs = batch.len(),
                        queues = queues.len(),
                        handed_back = returns.len(),
                        "fetched a batch"
                    );
                }
                Ok(if batch.is_empty() {
                    Fetched::Nothing(returns)
                } else {
                    Fetched::Batch(batch)
                })
            }
            Err(e) => {
                self.unsure = Some(Unsure {
                    token,
                    queues: queues.to_vec(),
                    returns,
                    counted,
                });
                Err(e)
            }
        }
    }

    /// Runs one call on the connection, after any acks that still have to be written. Its success
    /// confirms every ack written before it (Redis runs a connection's commands in order); a broken
    /// connection leaves them unknown, so they are written again.
    fn round_trip<T>(&mut self, op: impl FnOnce(&mut SyncConn) -> Result<T>) -> Result<T> {
        self.pay_mark();
        let result = self.write_unsent().and_then(|()| op(&mut self.conn));
        match &result {
            Ok(_) => self.clear_unconfirmed(),
            Err(e) if e.is_connection() => {
                let mut again = std::mem::take(&mut self.unconfirmed);
                again.append(&mut self.unsent);
                self.unsent = again;
            }
            Err(_) => self.clear_unconfirmed(),
        }
        result
    }

    /// Writes what waits in `unsent` (dialling if need be), in one write: its packets in order.
    fn write_unsent(&mut self) -> Result<()> {
        if self.unsent.is_empty() {
            return Ok(());
        }
        self.conn.send_dialling(&self.unsent)?;
        self.unconfirmed.append(&mut self.unsent);
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

/// The `class` of `unit` as written in its JSON, when its outline found it.
fn class_bytes(unit: &Unit) -> Option<&[u8]> {
    let range = unit.outline.as_ref()?.class.clone()?;
    unit.raw.get(range)
}

/// Whether `unit` is of the class a kept slot's job was (compared as written).
fn same_class(unit: &Unit, class: &[u8]) -> bool {
    class_bytes(unit) == Some(class)
}

/// Whether the slot `held`, kept from a job of its limit, serves a job of limit `lkey` with cap
/// `cap`: the same limit, leased under the same cap, and no job of it waits.
fn keeps(held: &Held, lkey: &str, cap: u64) -> bool {
    &*held.lkey == lkey
        && held
            .lease
            .as_ref()
            .is_some_and(|l| l.cap == cap && !l.contended())
}

/// `unit` starts running at `now`: in its thread's slot, timed, and in the job lines (dated
/// through the fetcher's wall clock, when they are on).
fn start(
    slot: &mut Slot,
    started: &mut Option<Instant>,
    lines: &JobLines,
    wall: &mut WallClock,
    unit: Unit,
    now: Instant,
) {
    lines.start(&unit.raw, unit.outline.as_ref(), || wall.since_epoch(now));
    slot.current = Some((unit, now));
    *started = Some(now);
}

fn prepend(buffer: &mut VecDeque<Unit>, units: Vec<Unit>) {
    for unit in units.into_iter().rev() {
        buffer.push_front(unit);
    }
}
