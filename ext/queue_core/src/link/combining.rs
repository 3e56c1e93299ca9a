//! Client calls from many threads sharing round trips: one connection per process and server that
//! every client thread writes through, with the calls made at the same time going out in one write.
//!
//! A Puma app enqueues from many threads at once. With a connection per thread each `perform_async`
//! was a round trip of its own, and 16 threads pushed no faster than one. Here the threads combine:
//! a call that finds no write in flight leads — it writes its own commands and reads their replies
//! (polling for them as `busy_poll` does when it is alone). A call that finds a write in flight
//! queues its packed commands and sleeps. The thread that has read a flight's replies writes every
//! call queued meanwhile in one `write` at once, before it hands out the replies it read, and wakes
//! the first of those calls to read theirs (`State::Read`): the connection never waits for a thread
//! to wake before its next write, and the batches form by themselves (what queued during one round
//! trip goes in the next), with no waiting to gather. A lone thread always leads at once: its cost
//! over a connection of its own is three uncontended locks.
//!
//! Each call still returns only once its replies are read (its job is in Redis). Replies stay per
//! call: an error reply (a script's, `READONLY`) fails only the call it answers. A connection that
//! breaks in a flight fails the calls whose replies were not all read, each as a connection error;
//! nothing is sent again (a push written once may have run). Calls whose replies were read before it
//! broke succeeded and return them. A dial that fails has written nothing: the waiting calls then try
//! again themselves, each leading in turn, so each gets its own error (and its own dial).
//!
//! The shared connection is an ordinary [`SyncConn`] (busy polling, TLS, unix sockets, Sentinel's
//! generation redial all as before). [`SyncConn::combined`] is the per-thread handle the Ruby
//! binding keeps; every call on it comes here. The connection belongs to the process that dialled
//! it: the registry's slot is keyed by pid, so a forked child makes its own slot and combiner and
//! never takes a lock of the parent's (another thread may have held it at the fork); the parent's is
//! leaked, never closed, as inherited connections are. A handle is its process's, as a connection
//! of one's own was ([`SyncConn::pid`]: the binding takes a new one in a child).

use std::borrow::Cow;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, Weak};

use redis::{ConnectionLike, ErrorKind, RedisError, RedisResult, Value};

use crate::error::{Error, Result};

use super::blocking::SyncConn;
use super::busy_poll::PollCounts;
use super::connection::Redis;

/// The connection shared by a process's client threads, and the calls waiting for it.
pub struct Combiner {
    queue: Mutex<Queue>,
    /// Locked by the leader only, so never contended (but by `poll_counts`).
    conn: Mutex<SyncConn>,
    /// A call saw a reply meaning the connection is on a demoted master (`READONLY`): the next
    /// leader dials again before writing.
    stale: AtomicBool,
    calls: AtomicU64,
    flights: AtomicU64,
}

/// What a combiner has done so far: calls made, writes (flights) they went out in, and calls
/// queued behind the flight in progress right now.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct CombineCounts {
    pub calls: u64,
    pub flights: u64,
    pub queued: usize,
}

#[derive(Default)]
struct Queue {
    /// A leader is writing or reading.
    leading: bool,
    waiting: VecDeque<Arc<Waiter>>,
}

/// A call queued behind the flight in progress.
struct Waiter {
    packed: Vec<u8>,
    count: usize,
    state: Mutex<State>,
    ready: Condvar,
}

enum State {
    Waiting,
    /// Lead the calls queued now, this one first.
    Lead,
    /// This call's flight (these calls, this one among them, in the order written) is written:
    /// read its replies and hand them out, as its leader would have.
    Read(Vec<Arc<Waiter>>),
    /// Its replies, or why they cannot come.
    Done(RedisResult<Vec<Value>>),
    /// The leader could not dial: nothing was written; try again.
    Retry,
}

/// One call's commands: the leader's own, or a waiter's.
struct Call<'a> {
    packed: &'a [u8],
    count: usize,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic elsewhere while holding it leaves plain data behind, still consistent.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Waiter {
    fn finish(&self, state: State) {
        *lock(&self.state) = state;
        self.ready.notify_one();
    }

    fn wait(&self) -> State {
        let mut state = lock(&self.state);
        loop {
            match std::mem::replace(&mut *state, State::Waiting) {
                State::Waiting => {
                    state = self.ready.wait(state).unwrap_or_else(|e| e.into_inner());
                }
                other => return other,
            }
        }
    }
}

impl Combiner {
    fn new(redis: &Redis) -> Combiner {
        Combiner {
            queue: Mutex::new(Queue::default()),
            conn: Mutex::new(SyncConn::polling(redis)),
            stale: AtomicBool::new(false),
            calls: AtomicU64::new(0),
            flights: AtomicU64::new(0),
        }
    }

    pub fn counts(&self) -> CombineCounts {
        CombineCounts {
            calls: self.calls.load(Ordering::Relaxed),
            flights: self.flights.load(Ordering::Relaxed),
            queued: lock(&self.queue).waiting.len(),
        }
    }

    /// What the shared connection's polling has done, if it polls and has found its socket.
    pub fn poll_counts(&self) -> Option<PollCounts> {
        lock(&self.conn).poll_counts()
    }

    /// Runs `op` (a client call: a command, a pipeline, a script) through the shared connection;
    /// errors are mapped as a connection of one's own maps them.
    pub(super) fn run<T>(
        &self,
        redis: &Redis,
        op: impl FnOnce(&mut dyn ConnectionLike) -> RedisResult<T>,
    ) -> Result<T> {
        let mut shared = Shared {
            combiner: self,
            failure: None,
        };
        let result = op(&mut shared);
        if let Some(e) = shared.failure {
            return Err(e);
        }
        result.map_err(|e| {
            let err = redis.command_error(e);
            if err.is_connection() {
                self.stale.store(true, Ordering::Relaxed);
            }
            err
        })
    }

    /// Sends `packed` (`count` commands whose replies are all wanted) and returns the replies, server
    /// errors among them as they came, the buffer queued as it is (not copied) if a flight is out.
    /// A failure of the connection is mapped as [`Combiner::run`] maps it.
    pub(super) fn run_packed(
        &self,
        redis: &Redis,
        packed: Vec<u8>,
        count: usize,
    ) -> Result<Vec<Value>> {
        self.submit(Cow::Owned(packed), count)?.map_err(|e| {
            let err = redis.command_error(e);
            if err.is_connection() {
                self.mark_stale();
            }
            err
        })
    }

    /// A reply said the connection is on a server that is no longer the master: the next leader
    /// dials again before writing.
    pub(super) fn mark_stale(&self) {
        self.stale.store(true, Ordering::Relaxed);
    }

    /// Sends `packed` (`count` commands) and returns their replies: as leader at once, or queued
    /// behind the flight in progress. The outer error is a dial's that wrote nothing.
    fn submit(&self, mut packed: Cow<'_, [u8]>, count: usize) -> Result<RedisResult<Vec<Value>>> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        loop {
            let mut queue = lock(&self.queue);
            if !queue.leading {
                queue.leading = true;
                drop(queue);
                return self.lead(
                    Call {
                        packed: &packed,
                        count,
                    },
                    Vec::new(),
                );
            }
            let waiter = Arc::new(Waiter {
                packed: std::mem::replace(&mut packed, Cow::Borrowed(&[])).into_owned(),
                count,
                state: Mutex::new(State::Waiting),
                ready: Condvar::new(),
            });
            queue.waiting.push_back(Arc::clone(&waiter));
            drop(queue);
            match waiter.wait() {
                State::Done(replies) => return Ok(replies),
                State::Retry | State::Waiting => {
                    // Rare (a dial failed): the commands go into the next try as they were.
                    packed = Cow::Owned(waiter.packed.clone());
                    continue;
                }
                State::Lead => {
                    let others: Vec<Arc<Waiter>> = lock(&self.queue).waiting.drain(..).collect();
                    let own = Call {
                        packed: &waiter.packed,
                        count: waiter.count,
                    };
                    return self.lead(own, others);
                }
                State::Read(flight) => return Ok(self.read(&waiter, flight)),
            }
        }
    }

    /// One flight: `own` and `others` in one write, their replies read in order. Then the calls
    /// queued meanwhile go out at once (`pipeline_next`), and each waiter gets its replies.
    fn lead(&self, own: Call<'_>, others: Vec<Arc<Waiter>>) -> Result<RedisResult<Vec<Value>>> {
        self.flights.fetch_add(1, Ordering::Relaxed);
        let total = own.count + others.iter().map(|w| w.count).sum::<usize>();
        let unwinding = Unwinding {
            combiner: self,
            others: &others,
        };
        let mut conn = lock(&self.conn);
        if self.stale.swap(false, Ordering::Relaxed) {
            conn.reset();
        }
        let exchanged = if others.is_empty() {
            conn.exchange(own.packed, total, true)
        } else {
            let len = own.packed.len() + others.iter().map(|w| w.packed.len()).sum::<usize>();
            let mut bytes = Vec::with_capacity(len);
            bytes.extend_from_slice(own.packed);
            for w in &others {
                bytes.extend_from_slice(&w.packed);
            }
            conn.exchange(&bytes, total, false)
        };
        std::mem::forget(unwinding);
        let (values, broken) = match exchanged {
            Ok(read) => read,
            Err(e) => {
                drop(conn);
                self.hand_on();
                for w in &others {
                    w.finish(State::Retry);
                }
                return Err(e);
            }
        };
        self.pipeline_next(conn);
        let mut replies = Replies::new(values, broken);
        let mine = replies.take(own.count);
        for w in &others {
            w.finish(State::Done(replies.take(w.count)));
        }
        Ok(mine)
    }

    /// Reads the replies of a flight written by the call before (`me` is one of `flight`), sends
    /// the calls queued meanwhile, and hands out the replies read.
    fn read(&self, me: &Arc<Waiter>, flight: Vec<Arc<Waiter>>) -> RedisResult<Vec<Value>> {
        let total = flight.iter().map(|w| w.count).sum::<usize>();
        let unwinding = Unwinding {
            combiner: self,
            others: &flight,
        };
        let mut conn = lock(&self.conn);
        let (values, broken) = conn.receive(total);
        std::mem::forget(unwinding);
        self.pipeline_next(conn);
        let mut replies = Replies::new(values, broken);
        let mut mine = Ok(Vec::new());
        for w in &flight {
            let taken = replies.take(w.count);
            if Arc::ptr_eq(w, me) {
                mine = taken;
            } else {
                w.finish(State::Done(taken));
            }
        }
        mine
    }

    /// After a flight's replies are read: the calls queued while it was out are written at once, by
    /// the thread that read them (Redis starts on them while that thread hands out the replies),
    /// and the first of them is woken to read their replies; with none queued, no one leads. A
    /// write that fails ends those calls (a dial's failure: they try again); the lead passes on.
    fn pipeline_next(&self, mut conn: MutexGuard<'_, SyncConn>) {
        let flight: Vec<Arc<Waiter>> = {
            let mut queue = lock(&self.queue);
            if queue.waiting.is_empty() {
                queue.leading = false;
                return;
            }
            queue.waiting.drain(..).collect()
        };
        self.flights.fetch_add(1, Ordering::Relaxed);
        if self.stale.swap(false, Ordering::Relaxed) {
            conn.reset();
        }
        let mut bytes = Vec::with_capacity(flight.iter().map(|w| w.packed.len()).sum());
        for w in &flight {
            bytes.extend_from_slice(&w.packed);
        }
        let sent = conn.send_all(&bytes);
        drop(conn);
        match sent {
            Ok(None) => {
                let reader = Arc::clone(&flight[0]);
                reader.finish(State::Read(flight));
            }
            Ok(Some(broken)) => {
                self.hand_on();
                for w in &flight {
                    w.finish(State::Done(Err(broken.clone())));
                }
            }
            Err(_) => {
                self.hand_on();
                for w in &flight {
                    w.finish(State::Retry);
                }
            }
        }
    }

    /// After a flight that failed (nothing left to read): the first call queued meanwhile leads the
    /// next one; with none, no one leads.
    fn hand_on(&self) {
        let mut queue = lock(&self.queue);
        match queue.waiting.pop_front() {
            Some(next) => {
                drop(queue);
                next.finish(State::Lead);
            }
            None => queue.leading = false,
        }
    }
}

/// A flight's replies, handed out call by call in the order written; calls whose replies were not
/// all read get the failure that stopped the reading.
struct Replies {
    values: std::vec::IntoIter<Value>,
    broken: Option<RedisError>,
}

impl Replies {
    fn new(values: Vec<Value>, broken: Option<RedisError>) -> Replies {
        Replies {
            values: values.into_iter(),
            broken,
        }
    }

    fn take(&mut self, count: usize) -> RedisResult<Vec<Value>> {
        let replies: Vec<Value> = self.values.by_ref().take(count).collect();
        match &self.broken {
            Some(e) if replies.len() < count => Err(e.clone()),
            _ => Ok(replies),
        }
    }
}

/// Armed while a leader writes and reads: should that panic, the calls of its flight fail and the
/// lead passes on, instead of every later call waiting for a flight that never ends; the connection,
/// perhaps mid-reply, is dialled again.
struct Unwinding<'a> {
    combiner: &'a Combiner,
    others: &'a [Arc<Waiter>],
}

impl Drop for Unwinding<'_> {
    fn drop(&mut self) {
        self.combiner.stale.store(true, Ordering::Relaxed);
        self.combiner.hand_on();
        for w in self.others {
            let failed = RedisError::from((ErrorKind::Io, "the write carrying this call failed"));
            w.finish(State::Done(Err(failed)));
        }
    }
}

/// One call's view of the shared connection: what `op` sends through it is submitted as one unit.
struct Shared<'a> {
    combiner: &'a Combiner,
    /// The dial's error when the call could not be sent (the `RedisError` returned stands for it).
    failure: Option<Error>,
}

impl Shared<'_> {
    fn call(&mut self, packed: &[u8], count: usize) -> RedisResult<Vec<Value>> {
        match self.combiner.submit(Cow::Borrowed(packed), count) {
            Ok(replies) => replies,
            Err(e) => {
                self.failure = Some(e);
                Err(RedisError::from((ErrorKind::Io, "not connected")))
            }
        }
    }
}

impl ConnectionLike for Shared<'_> {
    fn req_packed_command(&mut self, cmd: &[u8]) -> RedisResult<Value> {
        self.call(cmd, 1)?
            .pop()
            .ok_or_else(|| RedisError::from((ErrorKind::Io, "no reply")))
    }

    fn req_packed_commands(
        &mut self,
        cmd: &[u8],
        offset: usize,
        count: usize,
    ) -> RedisResult<Vec<Value>> {
        let mut replies = self.call(cmd, offset + count)?;
        // A transaction: the replies to MULTI and each QUEUED come first; an error among them
        // means nothing ran.
        if let Some(Value::ServerError(e)) = replies[..offset]
            .iter()
            .find(|v| matches!(v, Value::ServerError(_)))
        {
            return Err(RedisError::from(e.clone()));
        }
        Ok(replies.split_off(offset))
    }

    fn get_db(&self) -> i64 {
        0
    }

    fn check_connection(&mut self) -> bool {
        redis::cmd("PING").query::<String>(self).is_ok()
    }

    fn is_open(&self) -> bool {
        true
    }
}

/// Where a [`Redis`] keeps its process's combiner: weakly, so that it goes (and its connection
/// closes) with the last thread's handle.
///
/// Keyed by process: the slot holding the combiner belongs to the process that made it, and a forked
/// child that finds its parent's slot makes its own and swaps it in (compare-and-swap, no lock). A
/// lock of the parent's slot is never taken in the child: it may have been held by another of the
/// parent's threads at the fork, and that thread does not exist in the child to release it.
#[derive(Default)]
pub(super) struct Registry(AtomicPtr<Slot>);

/// One process's slot: its pid, and its combiner while some thread holds a handle on it.
struct Slot {
    pid: u32,
    combiner: Mutex<Weak<Combiner>>,
}

impl Registry {
    /// This process's combiner for `redis`, made if there is none (or only the parent's).
    pub(super) fn get(&self, redis: &Redis) -> Arc<Combiner> {
        let slot = self.slot();
        let mut weak = lock(&slot.combiner);
        if let Some(combiner) = weak.upgrade() {
            return combiner;
        }
        let combiner = Arc::new(Combiner::new(redis));
        *weak = Arc::downgrade(&combiner);
        combiner
    }

    /// This process's slot, made (and swapped in for the parent's) if it has none.
    fn slot(&self) -> &Slot {
        let pid = std::process::id();
        let mut current = self.0.load(Ordering::Acquire);
        loop {
            // SAFETY: a slot swapped in is never freed while the registry lives (the parent's,
            // replaced in a child, is leaked), so a pointer loaded from it stays valid.
            if let Some(slot) = unsafe { current.as_ref() } {
                if slot.pid == pid {
                    return slot;
                }
            }
            let fresh = Box::into_raw(Box::new(Slot {
                pid,
                combiner: Mutex::new(Weak::new()),
            }));
            match self
                .0
                .compare_exchange(current, fresh, Ordering::AcqRel, Ordering::Acquire)
            {
                // The replaced slot, if any, is the parent's: leaked, its lock perhaps held for
                // ever, its combiner's socket the parent's.
                Ok(_) => current = fresh,
                Err(other) => {
                    // Another thread of this process swapped its own in first.
                    // SAFETY: `fresh` was never shared.
                    drop(unsafe { Box::from_raw(fresh) });
                    current = other;
                }
            }
        }
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        let slot = *self.0.get_mut();
        // SAFETY: no other reference to the registry remains. A slot of another process (inherited
        // through fork, never used here) is left alone: its lock and combiner are the parent's.
        if let Some(owned) = unsafe { slot.as_ref() } {
            if owned.pid == std::process::id() {
                drop(unsafe { Box::from_raw(slot) });
            }
        }
    }
}
