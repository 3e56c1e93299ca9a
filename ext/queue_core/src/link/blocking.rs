//! Blocking access for callers that are not async (the Ruby binding, fetchers, scripts, tests), on the
//! caller's own thread: never a thread hop.
//!
//! [`SyncConn`] is a plain synchronous connection: a write and a read per call, nothing else (about
//! 7 µs of CPU a call here, against ~20 µs through a runtime and a multiplexed connection). The Ruby
//! client pushes on one per thread, polling its socket for each reply for a moment before it sleeps
//! (`busy_poll`); each fetcher runs on one, where it also writes commands whose replies are switched
//! off (acknowledgements) without waiting; over TCP those wait in the kernel for the connection's
//! next round trip (`tcp_socket`). [`BlockingConn`] drives any async engine operation on a
//! current-thread runtime, for the rest (reads such as `stats`).

use std::sync::Arc;

use redis::{ConnectionLike, FromRedisValue};

use crate::error::{Error, Result};
use crate::keys::Keys;

use super::busy_poll::{BusyPoll, PollCounts};
use super::combining::Combiner;
use super::connection::{Conn, Redis};
use super::reply_mode::{self, Replies, SwitchOn};
use super::tcp_socket::TcpSocket;

/// A synchronous connection that redials after it breaks. One per thread.
///
/// Unreplied writes switch the connection's replies off and the next call switches them on in the
/// same write (`reply_mode`): callers write plain commands and never see the switches.
pub struct SyncConn {
    redis: Redis,
    conn: Option<redis::Connection>,
    /// Whether this connection's unreplied writes may wait in the kernel for its next round trip
    /// (a fetcher's acks): then each dial looks for `socket`.
    holds: bool,
    /// How this connection polls for its replies, if it does (a client's): then each dial looks for
    /// `socket` too.
    poll: Option<BusyPoll>,
    /// The socket of `conn` when one of the two needs it and it can be found (plain TCP); set with
    /// `conn`, cleared with it.
    socket: Option<TcpSocket>,
    /// The mode of `conn`; a new connection answers.
    replies: Replies,
    /// [`Redis::generation`] when `conn` was dialled.
    generation: u64,
    pid: u32,
    /// A client thread's handle on its process's shared connection (`combining`): then every call
    /// goes there, and `conn` stays unused.
    shared: Option<Arc<Combiner>>,
}

impl SyncConn {
    pub fn new(redis: &Redis) -> SyncConn {
        SyncConn {
            redis: redis.clone(),
            conn: None,
            holds: false,
            poll: None,
            socket: None,
            replies: Replies::On,
            generation: 0,
            pid: std::process::id(),
            shared: None,
        }
    }

    /// A client thread's handle on the connection its process's client threads share (`combining`):
    /// calls made at the same time from several threads go out in one write. With `wait_replicas`,
    /// a connection of the thread's own instead ([`SyncConn::polling`]): each push ends with a
    /// `WAIT` that holds its connection until the replicas answer, and on a shared connection the
    /// calls of one flight would wait one after another (k calls, up to k timeouts for the last).
    pub fn combined(redis: &Redis) -> SyncConn {
        if redis.wait_replicas().is_some() {
            return SyncConn::polling(redis);
        }
        SyncConn {
            shared: Some(redis.combiner()),
            ..SyncConn::new(redis)
        }
    }

    /// A connection whose unreplied writes due with the next call wait in the kernel for it, over
    /// TCP ([`Due::WithNextCall`], `tcp_socket`): a fetcher's. Finding the socket costs each dial a
    /// `CLIENT INFO` and a look through the process's descriptors, which other callers do not need.
    pub fn holding(redis: &Redis) -> SyncConn {
        SyncConn {
            holds: true,
            ..SyncConn::new(redis)
        }
    }

    /// A client's connection: it polls for each reply for up to the server's `busy_poll` before it
    /// sleeps (`busy_poll`), over plain TCP when its socket is found.
    pub fn polling(redis: &Redis) -> SyncConn {
        SyncConn {
            poll: BusyPoll::new(redis.busy_poll()),
            ..SyncConn::new(redis)
        }
    }

    /// What this connection's polling has done, if it polls and has found its socket.
    pub fn poll_counts(&self) -> Option<PollCounts> {
        if let Some(shared) = &self.shared {
            return shared.poll_counts();
        }
        self.socket.as_ref()?;
        self.poll.as_ref().map(BusyPoll::counts)
    }

    /// What the shared connection has done, if this is a handle on one (`combining`).
    pub fn combine_counts(&self) -> Option<super::combining::CombineCounts> {
        self.shared.as_ref().map(|shared| shared.counts())
    }

    /// The process that made this connection; a forked child must make its own.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    pub fn keys(&self) -> &Keys {
        self.redis.keys()
    }

    /// How many replicas each push waits for, if any (`link::wait_replicas`).
    pub fn wait_replicas(&self) -> Option<super::wait_replicas::WaitReplicas> {
        self.redis.wait_replicas()
    }

    /// Open, and on the master of the current generation.
    fn is_open(&self) -> bool {
        self.conn.as_ref().is_some_and(|c| c.is_open()) && !self.is_stale()
    }

    /// Dialled before the master last moved (Sentinel's `+switch-master`, [`Redis::generation`]).
    fn is_stale(&self) -> bool {
        self.conn.is_some() && self.generation != self.redis.generation()
    }

    /// Dials a connection if there is none open, or if the one open is on a master that has since
    /// moved (Sentinel's `+switch-master`, [`Redis::generation`]). Unreplied writes on such a
    /// connection since its last round trip are unconfirmed, perhaps on the old master only: then
    /// this fails as a connection error, so a caller that resends them after one (a fetcher's acks)
    /// does; otherwise it dials the new master and the call goes on.
    fn open(&mut self) -> Result<()> {
        let generation = self.redis.generation();
        if self.is_stale() {
            let unconfirmed = self.replies == Replies::Off;
            self.drop_conn();
            if unconfirmed {
                return Err(Error::connection(
                    "the master moved (Sentinel +switch-master); writes not yet confirmed are unknown",
                ));
            }
        }
        if !self.is_open() {
            self.drop_conn();
            self.generation = generation;
            let mut conn = self.redis.dial_sync()?;
            let wanted = self.holds || self.poll.is_some();
            self.socket = if wanted && self.redis.is_plain_tcp() {
                TcpSocket::find(&mut conn)
            } else {
                None
            };
            self.replies = Replies::On;
            self.conn = Some(conn);
        }
        Ok(())
    }

    /// Maps a failure of the connection; one that broke it is dropped, to be dialled again.
    fn failed(&mut self, e: redis::RedisError) -> Error {
        let err = self.redis.command_error(e);
        if err.is_connection() {
            self.drop_conn();
        }
        err
    }

    fn drop_conn(&mut self) {
        self.socket = None;
        self.conn = None;
    }

    /// Drops the connection, to be dialled again by the next call (`combining`, after a reply that
    /// said the server is no longer the master).
    pub(super) fn reset(&mut self) {
        self.drop_conn();
    }

    /// For `combining`: writes `packed`, commands whose replies are all wanted, and reads `count`
    /// replies. An error is a dial's (nothing written); otherwise the replies read, and the failure
    /// that stopped the reading early, if one did (the connection is then dropped).
    /// `poll`: whether to poll for the replies (`busy_poll`) if this connection polls at all.
    pub(super) fn exchange(
        &mut self,
        packed: &[u8],
        count: usize,
        poll: bool,
    ) -> Result<(Vec<redis::Value>, Option<redis::RedisError>)> {
        self.open()?;
        let conn = self
            .conn
            .as_mut()
            .ok_or_else(|| Error::connection("not connected"))?;
        let mut switching = SwitchOn::new(conn, self.replies);
        let mut wait = (self.poll.as_mut().filter(|_| poll))
            .zip(self.socket.as_ref())
            .map(|(poll, socket)| move || poll.wait(socket));
        if let Some(wait) = wait.as_mut() {
            switching = switching.before_reading(wait);
        }
        let (values, broken) = switching.exchange(packed, count);
        self.replies = switching.mode();
        if broken.is_some() {
            self.drop_conn();
        }
        Ok((values, broken))
    }

    /// For `combining`'s pipelined flights: writes `packed`, commands whose replies are all wanted,
    /// for [`SyncConn::receive`] to read later. The outer error is a dial's (nothing written); the
    /// inner one a write's that failed (the connection is dropped, the commands perhaps sent).
    pub(super) fn send_all(&mut self, packed: &[u8]) -> Result<Option<redis::RedisError>> {
        self.open()?;
        let conn = self
            .conn
            .as_mut()
            .ok_or_else(|| Error::connection("not connected"))?;
        let mut switching = SwitchOn::new(conn, self.replies);
        let sent = switching.send_all(packed);
        self.replies = switching.mode();
        Ok(sent.err().inspect(|_| self.drop_conn()))
    }

    /// Reads `count` replies to what [`SyncConn::send_all`] wrote: those read, and the failure that
    /// stopped the reading early, if one did (the connection is then dropped).
    pub(super) fn receive(
        &mut self,
        count: usize,
    ) -> (Vec<redis::Value>, Option<redis::RedisError>) {
        let Some(conn) = self.conn.as_mut() else {
            let gone = redis::RedisError::from((redis::ErrorKind::Io, "not connected"));
            return (Vec::new(), Some(gone));
        };
        let (values, broken) = SwitchOn::new(conn, self.replies).receive(count);
        if broken.is_some() {
            self.drop_conn();
        }
        (values, broken)
    }

    /// One round trip (or a few), with replies switched back on first if they are off.
    fn run<T>(
        &mut self,
        op: impl FnOnce(&mut dyn ConnectionLike) -> redis::RedisResult<T>,
    ) -> Result<T> {
        if let Some(shared) = &self.shared {
            return shared.run(&self.redis, op);
        }
        self.open()?;
        let conn = self
            .conn
            .as_mut()
            .ok_or_else(|| Error::connection("not connected"))?;
        // Read after `open`: a connection it dialled answers.
        let mut switching = SwitchOn::new(conn, self.replies);
        let mut wait = (self.poll.as_mut())
            .zip(self.socket.as_ref())
            .map(|(poll, socket)| move || poll.wait(socket));
        if let Some(wait) = wait.as_mut() {
            switching = switching.before_reading(wait);
        }
        let result = op(&mut switching);
        self.replies = switching.mode();
        result.map_err(|e| self.failed(e))
    }

    /// Sends `packed`, `count` commands whose replies are all wanted (written with [`crate::resp`]),
    /// and returns their replies; a server error among them is the call's error, mapped as any
    /// other (`READONLY` is a connection error). On the shared connection the buffer is queued as
    /// it is, not copied.
    pub fn call_packed(&mut self, packed: Vec<u8>, count: usize) -> Result<Vec<redis::Value>> {
        let replies = self.exchange_packed(packed, count)?;
        self.replied(replies)
    }

    /// [`SyncConn::call_packed`] leaving the server errors among the replies to the caller (a
    /// script's `NOSCRIPT`, then [`SyncConn::replied`]).
    pub fn exchange_packed(&mut self, packed: Vec<u8>, count: usize) -> Result<Vec<redis::Value>> {
        if let Some(shared) = &self.shared {
            return shared.run_packed(&self.redis, packed, count);
        }
        self.run(|c| c.req_packed_commands(&packed, 0, count))
    }

    /// Replies as [`SyncConn::call_packed`] returns them: the first server error among them, if any,
    /// as the call's error.
    pub fn replied(&mut self, replies: Vec<redis::Value>) -> Result<Vec<redis::Value>> {
        let Some(e) = replies.iter().find_map(|v| match v {
            redis::Value::ServerError(e) => Some(e.clone()),
            _ => None,
        }) else {
            return Ok(replies);
        };
        let err = self.redis.command_error(redis::RedisError::from(e));
        if err.is_connection() {
            match &self.shared {
                Some(shared) => shared.mark_stale(),
                None => self.drop_conn(),
            }
        }
        Err(err)
    }

    /// Loads a script into the server's script cache (after a `NOSCRIPT`).
    pub fn load(&mut self, script: &redis::Script) -> Result<()> {
        self.run(|c| script.load(c)).map(|_| ())
    }

    pub fn pipe<T: FromRedisValue>(&mut self, pipe: &redis::Pipeline) -> Result<T> {
        self.run(|c| pipe.query(c))
    }

    pub fn cmd<T: FromRedisValue>(&mut self, cmd: &redis::Cmd) -> Result<T> {
        self.run(|c| cmd.query(c))
    }

    /// Sends `cmd`, an `EVALSHA` of `script` built by the caller; loads the script and sends it again
    /// if the server does not have it (as [`SyncConn::script`] does).
    pub fn evalsha<T: FromRedisValue>(
        &mut self,
        script: &redis::Script,
        cmd: &redis::Cmd,
    ) -> Result<T> {
        self.run(|c| match cmd.query(c) {
            Err(e) if e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript) => {
                script.load(c)?;
                cmd.query(c)
            }
            other => other,
        })
    }

    /// Runs a Lua script by its SHA, loading it first if the server does not have it.
    pub fn script<T: FromRedisValue>(
        &mut self,
        invocation: &redis::ScriptInvocation<'_>,
    ) -> Result<T> {
        self.run(|c| invocation.invoke(c))
    }

    /// Loads a Lua script into the server's script cache (for a pipeline that runs it by its SHA).
    pub fn load_script(&mut self, invocation: &redis::ScriptInvocation<'_>) -> Result<()> {
        self.run(|c| invocation.load(c)).map(|_| ())
    }

    /// Writes commands (packed) whose replies are not wanted, without reading anything, on the
    /// connection already open. Never dials: a caller that must not block on a connect (it holds the
    /// GVL) keeps the bytes for later instead. Redis runs them before anything written later here;
    /// `when` says whether they may wait for the next call (see [`Due`]).
    pub fn send_unreplied(&mut self, packed: &[u8], when: Due) -> Result<()> {
        if !self.is_open() {
            return Err(Error::connection("not connected"));
        }
        self.write_unreplied(packed, when)
    }

    /// Like [`SyncConn::send_unreplied`], dialling first if there is no connection; for writes the
    /// caller follows with a call (resending what a broken connection left unconfirmed).
    pub fn send_dialling(&mut self, packed: &[u8]) -> Result<()> {
        self.write_unreplied(packed, Due::WithNextCall)
    }

    fn write_unreplied(&mut self, packed: &[u8], when: Due) -> Result<()> {
        self.open()?;
        let bytes = reply_mode::unreplied(self.replies, packed);
        let Some(conn) = self.conn.as_mut() else {
            return Err(Error::connection("not connected"));
        };
        let held = self.socket.as_ref().filter(|_| self.holds);
        let sent = match (held, when) {
            (Some(socket), Due::WithNextCall) => {
                socket.send_held(&bytes).map_err(redis::RedisError::from)
            }
            // Sent now, with whatever the kernel holds before it.
            _ => conn.send_packed_command(&bytes),
        };
        match sent {
            Ok(()) => {
                self.replies = Replies::Off;
                Ok(())
            }
            Err(e) => {
                // Perhaps partly written: the connection's mode is unknown, so it is not used again.
                let err = self.failed(e);
                self.drop_conn();
                Err(err)
            }
        }
    }
}

/// When an unreplied write must reach Redis.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Due {
    /// With the connection's next call: over TCP the kernel holds it until then (`tcp_socket`), or
    /// ~200 ms at most. For what only this process reads back (a finished job's ack).
    WithNextCall,
    /// Now: someone else acts on it (a released deduplication key admits the next push).
    Now,
}

pub struct BlockingConn {
    rt: tokio::runtime::Runtime,
    conn: Conn,
    pid: u32,
}

impl BlockingConn {
    pub fn new(redis: &Redis) -> Result<BlockingConn> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| Error::closed_by("cannot start a runtime", e))?;
        Ok(BlockingConn {
            rt,
            conn: redis.conn(),
            pid: std::process::id(),
        })
    }

    /// The process that made this connection; a forked child must make its own.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Runs one async operation on this connection, blocking the calling thread.
    pub fn run<T>(&mut self, op: impl AsyncFnOnce(&mut Conn) -> Result<T>) -> Result<T> {
        let conn = &mut self.conn;
        self.rt.block_on(op(conn))
    }
}
