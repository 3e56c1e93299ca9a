//! The push side: what `perform_async`, `perform_in` and `push_bulk` write.
//!
//! The Ruby client builds and serializes each job (middleware may change it); this module writes them
//! in Sidekiq's layout: an immediate job is `LPUSH`ed onto `queue:<name>` with the name added to
//! `queues`; a future job is `ZADD`ed to `schedule` scored by its run-at time. Each call is one round
//! trip however many jobs it carries. The commands are built once here and sent either on an async
//! [`Conn`] or on a [`SyncConn`]: [`push_sync`] and [`schedule_sync`] are exactly what the Ruby
//! client's `perform_async` and `perform_in` run, on the calling thread's connection.

use crate::blocking::SyncConn;
use crate::clock::float_string;
use crate::connection::Conn;
use crate::error::{Error, Result};
use crate::keys::Keys;

/// The commands of an immediate push: the queue name into `queues`, the jobs onto its list (in the
/// order given, so the first runs first). One round trip on either kind of connection.
pub fn push_pipeline(keys: &Keys, queue: &str, jobs: &[Vec<u8>]) -> Result<redis::Pipeline> {
    check_queue_name(queue)?;
    let mut pipe = redis::pipe();
    pipe.cmd("SADD").arg(keys.queues()).arg(queue).ignore();
    pipe.cmd("LPUSH").arg(keys.queue(queue)).arg(jobs).ignore();
    Ok(pipe)
}

/// The command that adds jobs to `schedule`, each with its run-at time (epoch seconds).
pub fn schedule_cmd(keys: &Keys, jobs: &[(f64, Vec<u8>)]) -> Result<redis::Cmd> {
    let mut cmd = redis::cmd("ZADD");
    cmd.arg(keys.schedule());
    for (at, job) in jobs {
        if !at.is_finite() {
            return Err(Error::InvalidArgument(format!(
                "scheduled time must be a finite number, got {at}"
            )));
        }
        cmd.arg(float_string(*at)).arg(job);
    }
    Ok(cmd)
}

/// Pushes serialized jobs onto one queue, on a caller's synchronous connection (the Ruby client).
pub fn push_sync(conn: &mut SyncConn, queue: &str, jobs: &[Vec<u8>]) -> Result<()> {
    let pipe = push_pipeline(conn.keys(), queue, jobs)?;
    if jobs.is_empty() {
        return Ok(());
    }
    conn.pipe(&pipe)
}

/// Adds serialized jobs to the `schedule` set, on a caller's synchronous connection.
pub fn schedule_sync(conn: &mut SyncConn, jobs: &[(f64, Vec<u8>)]) -> Result<()> {
    let cmd = schedule_cmd(conn.keys(), jobs)?;
    if jobs.is_empty() {
        return Ok(());
    }
    conn.cmd::<i64>(&cmd).map(|_| ())
}

/// Pushes serialized jobs onto one queue.
pub async fn push(conn: &mut Conn, queue: &str, jobs: &[Vec<u8>]) -> Result<()> {
    let pipe = push_pipeline(conn.keys(), queue, jobs)?;
    if jobs.is_empty() {
        return Ok(());
    }
    conn.pipe(&pipe).await
}

/// Adds serialized jobs to the `schedule` set.
pub async fn schedule(conn: &mut Conn, jobs: &[(f64, Vec<u8>)]) -> Result<()> {
    let cmd = schedule_cmd(conn.keys(), jobs)?;
    if jobs.is_empty() {
        return Ok(());
    }
    conn.cmd::<i64>(&cmd).await.map(|_| ())
}

/// Sidekiq requires a non-empty queue name; we also refuse characters that would make the key
/// ambiguous to read back.
pub fn check_queue_name(queue: &str) -> Result<()> {
    if queue.is_empty() {
        return Err(Error::InvalidArgument(
            "queue name must not be empty".to_owned(),
        ));
    }
    if queue.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(Error::InvalidArgument(format!(
            "queue name {queue:?} must not contain whitespace"
        )));
    }
    Ok(())
}
