//! The push side: what `perform_async`, `perform_in` and `push_bulk` write.
//!
//! The Ruby client builds and serializes each job (middleware may change it); this module writes them
//! in Sidekiq's layout: an immediate job is `LPUSH`ed onto `queue:<name>` with the name added to
//! `queues`; a future job is `ZADD`ed to `schedule` scored by its run-at time. Each call is one round
//! trip however many jobs it carries.

use crate::clock::float_string;
use crate::connection::Conn;
use crate::error::{Error, Result};

/// Pushes serialized jobs onto one queue. Jobs are pushed in the order given, so the first runs first.
pub async fn push(conn: &mut Conn, queue: &str, jobs: &[Vec<u8>]) -> Result<()> {
    check_queue_name(queue)?;
    if jobs.is_empty() {
        return Ok(());
    }
    let keys = conn.keys();
    let mut pipe = redis::pipe();
    pipe.cmd("SADD").arg(keys.queues()).arg(queue).ignore();
    pipe.cmd("LPUSH").arg(keys.queue(queue)).arg(jobs).ignore();
    conn.pipe(&pipe).await
}

/// Adds serialized jobs to the `schedule` set, each with its run-at time (epoch seconds).
pub async fn schedule(conn: &mut Conn, jobs: &[(f64, Vec<u8>)]) -> Result<()> {
    if jobs.is_empty() {
        return Ok(());
    }
    let mut cmd = redis::cmd("ZADD");
    cmd.arg(conn.keys().schedule());
    for (at, job) in jobs {
        if !at.is_finite() {
            return Err(Error::InvalidArgument(format!(
                "scheduled time must be a finite number, got {at}"
            )));
        }
        cmd.arg(float_string(*at)).arg(job);
    }
    conn.cmd(&cmd).await
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
