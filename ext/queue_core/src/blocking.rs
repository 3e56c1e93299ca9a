//! Blocking access for callers that are not async (the Ruby binding, scripts, tests): a connection
//! driven by a current-thread runtime on the caller's own thread. One per thread; never a thread hop.

use crate::connection::{Conn, Redis};
use crate::error::{Error, Result};

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
