//! Blocking access for callers that are not async (the Ruby binding, fetchers, scripts, tests), on the
//! caller's own thread: never a thread hop.
//!
//! [`SyncConn`] is a plain synchronous connection: a write and a read per call, nothing else (about
//! 7 µs of CPU a call here, against ~20 µs through a runtime and a multiplexed connection). The Ruby
//! client pushes on one per thread, and each fetcher runs on one, where it also writes commands whose
//! replies are switched off (acknowledgements) without waiting; over TCP those wait in the kernel for
//! the connection's next round trip (`tcp_hold`). [`BlockingConn`] drives any async
//! engine operation on a current-thread runtime, for the rest (reads such as `stats`).

use redis::{ConnectionLike, FromRedisValue};

use crate::connection::{Conn, Redis};
use crate::error::{Error, Result};
use crate::keys::Keys;
use crate::reply_mode::{self, Replies, SwitchOn};
use crate::tcp_hold::TcpHold;

/// A synchronous connection that redials after it breaks. One per thread.
///
/// Unreplied writes switch the connection's replies off and the next call switches them on in the
/// same write (`reply_mode`): callers write plain commands and never see the switches.
pub struct SyncConn {
    redis: Redis,
    conn: Option<redis::Connection>,
    /// Whether this connection's unreplied writes may wait in the kernel for its next round trip
    /// (a fetcher's acks): then each dial looks for `hold`.
    holds: bool,
    /// The socket of `conn` when they can (TCP); set with `conn`, cleared with it.
    hold: Option<TcpHold>,
    /// The mode of `conn`; a new connection answers.
    replies: Replies,
    pid: u32,
}

impl SyncConn {
    pub fn new(redis: &Redis) -> SyncConn {
        SyncConn {
            redis: redis.clone(),
            conn: None,
            holds: false,
            hold: None,
            replies: Replies::On,
            pid: std::process::id(),
        }
    }

    /// A connection whose unreplied writes due with the next call wait in the kernel for it, over
    /// TCP ([`Due::WithNextCall`], `tcp_hold`): a fetcher's. Finding the socket costs each dial a
    /// `CLIENT INFO` and a look through the process's descriptors, which other callers do not need.
    pub fn holding(redis: &Redis) -> SyncConn {
        SyncConn {
            holds: true,
            ..SyncConn::new(redis)
        }
    }

    /// The process that made this connection; a forked child must make its own.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    pub fn keys(&self) -> &Keys {
        self.redis.keys()
    }

    fn is_open(&self) -> bool {
        self.conn.as_ref().is_some_and(|c| c.is_open())
    }

    /// Dials a connection if there is none open.
    fn open(&mut self) -> Result<()> {
        if !self.is_open() {
            self.drop_conn();
            let mut conn = self.redis.dial_sync()?;
            self.hold = if self.holds && self.redis.is_plain_tcp() {
                TcpHold::find(&mut conn)
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
        self.hold = None;
        self.conn = None;
    }

    /// One round trip (or a few), with replies switched back on first if they are off.
    fn run<T>(
        &mut self,
        op: impl FnOnce(&mut dyn ConnectionLike) -> redis::RedisResult<T>,
    ) -> Result<T> {
        self.open()?;
        let conn = self
            .conn
            .as_mut()
            .ok_or_else(|| Error::connection("not connected"))?;
        // Read after `open`: a connection it dialled answers.
        let mut switching = SwitchOn::new(conn, self.replies);
        let result = op(&mut switching);
        self.replies = switching.mode();
        result.map_err(|e| self.failed(e))
    }

    pub fn pipe<T: FromRedisValue>(&mut self, pipe: &redis::Pipeline) -> Result<T> {
        self.run(|c| pipe.query(c))
    }

    pub fn cmd<T: FromRedisValue>(&mut self, cmd: &redis::Cmd) -> Result<T> {
        self.run(|c| cmd.query(c))
    }

    /// Runs a Lua script by its SHA, loading it first if the server does not have it.
    pub fn script<T: FromRedisValue>(
        &mut self,
        invocation: &redis::ScriptInvocation<'_>,
    ) -> Result<T> {
        self.run(|c| invocation.invoke(c))
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
        let sent = match (&self.hold, when) {
            (Some(hold), Due::WithNextCall) => {
                hold.send_held(&bytes).map_err(redis::RedisError::from)
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
    /// With the connection's next call: over TCP the kernel holds it until then (`tcp_hold`), or
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
