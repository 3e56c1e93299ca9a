//! Blocking access for callers that are not async (the Ruby binding, scripts, tests), on the caller's
//! own thread: never a thread hop.
//!
//! [`SyncConn`] is a plain synchronous connection for one-command calls such as a client push: a
//! write and a read, nothing else (about 7 µs of CPU a call here, against ~20 µs through a runtime and
//! a multiplexed connection). [`BlockingConn`] drives any async engine operation on a current-thread
//! runtime, for the rest.

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
            .ok_or_else(|| Error::Connection("not connected".to_owned()))?;
        op(conn).map_err(|e| {
            let err = Error::from(e);
            if matches!(err, Error::Connection(_)) {
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
            .map_err(|e| Error::Closed(format!("cannot start a runtime: {e}")))?;
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
