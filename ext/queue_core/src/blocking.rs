//! Blocking access for callers that are not async (the Ruby binding, fetchers, scripts, tests), on the
//! caller's own thread: never a thread hop.
//!
//! [`SyncConn`] is a plain synchronous connection: a write and a read per call, nothing else (about
//! 7 µs of CPU a call here, against ~20 µs through a runtime and a multiplexed connection). The Ruby
//! client pushes on one per thread, and each fetcher runs on one, where it also writes commands whose
//! replies are switched off (acknowledgements) without waiting. [`BlockingConn`] drives any async
//! engine operation on a current-thread runtime, for the rest (reads such as `stats`).

use redis::{ConnectionLike, FromRedisValue};

use crate::connection::{Conn, Redis};
use crate::error::{Error, Result};
use crate::keys::Keys;

/// A synchronous connection that redials after it breaks. One per thread.
pub struct SyncConn {
    redis: Redis,
    conn: Option<redis::Connection>,
    pid: u32,
}

impl SyncConn {
    pub fn new(redis: &Redis) -> SyncConn {
        SyncConn {
            redis: redis.clone(),
            conn: None,
            pid: std::process::id(),
        }
    }

    /// The process that made this connection; a forked child must make its own.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    pub fn keys(&self) -> &Keys {
        self.redis.keys()
    }

    fn run<T>(
        &mut self,
        op: impl FnOnce(&mut redis::Connection) -> redis::RedisResult<T>,
    ) -> Result<T> {
        if self.conn.as_ref().is_none_or(|c| !c.is_open()) {
            self.conn = Some(self.redis.dial_sync()?);
        }
        let conn = self
            .conn
            .as_mut()
            .ok_or_else(|| Error::connection("not connected"))?;
        op(conn).map_err(|e| {
            let err = self.redis.command_error(e);
            if err.is_connection() {
                self.conn = None;
            }
            err
        })
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

    /// Writes commands whose replies are switched off (`CLIENT REPLY SKIP`), without reading
    /// anything, on the connection already open. Never dials: a caller that must not block on a
    /// connect (it holds the GVL) keeps the bytes for later instead.
    pub fn send_unreplied(&mut self, packed: &[u8]) -> Result<()> {
        if self.conn.as_ref().is_none_or(|c| !c.is_open()) {
            return Err(Error::connection("not connected"));
        }
        self.run(|c| c.send_packed_command(packed))
    }

    /// Like [`SyncConn::send_unreplied`], dialling first if there is no connection.
    pub fn send_dialling(&mut self, packed: &[u8]) -> Result<()> {
        self.run(|c| c.send_packed_command(packed))
    }
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
