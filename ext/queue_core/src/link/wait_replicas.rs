//! `wait_replicas`: a push returns only once that many replicas have it.
//!
//! Redis replicates asynchronously: a write the master acknowledged may not have reached a replica
//! yet, and a failover that promotes the replica discards it when the old master rejoins as a
//! replica. With `redis: {wait_replicas: N, wait_timeout: MS}` every push (queue, schedule,
//! deduplicated, ordered) ends its pipeline with `WAIT N MS`: Redis answers how many replicas have
//! acknowledged everything the connection wrote so far, after at most `MS`. Fewer than `N` is
//! [`Error::Replication`]: the job is on the master and may still run, or be lost in a failover, so
//! the push is not sent again (a second push could run it twice); the caller decides.
//!
//! Without the option nothing here runs: a push's pipeline is exactly what it was.

use std::time::Duration;

use redis::FromRedisValue;

use crate::error::{Error, Result};

use super::blocking::SyncConn;
use super::connection::Conn;

/// How long a push waits for its replicas unless configured (`wait_timeout:`).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_millis(1000);

/// How many replicas must acknowledge a push, and how long it waits for them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WaitReplicas {
    pub replicas: u32,
    pub timeout: Duration,
}

impl WaitReplicas {
    /// `replicas` of at least one and a timeout of at least a millisecond (`WAIT n 0` would block for
    /// ever).
    pub fn new(replicas: u32, timeout: Duration) -> Result<WaitReplicas> {
        if replicas == 0 {
            return Err(Error::InvalidArgument(
                "redis option wait_replicas: must be at least 1 (leave it out to not wait)"
                    .to_owned(),
            ));
        }
        if timeout.as_millis() == 0 {
            return Err(Error::InvalidArgument(
                "redis option wait_timeout: must be at least 1 ms".to_owned(),
            ));
        }
        Ok(WaitReplicas { replicas, timeout })
    }

    fn timeout_ms(&self) -> u128 {
        self.timeout.as_millis()
    }

    /// Appends `WAIT` to a push's pipeline; its reply is the last one.
    fn append(&self, pipe: &mut redis::Pipeline) {
        pipe.cmd("WAIT")
            .arg(self.replicas)
            .arg(self.timeout_ms() as u64);
    }

    /// The error when `reached` replicas acknowledged, fewer than wanted.
    fn check(&self, reached: i64) -> Result<()> {
        if reached >= i64::from(self.replicas) {
            return Ok(());
        }
        Err(Error::Replication {
            wanted: self.replicas,
            reached,
            timeout_ms: self.timeout_ms() as u64,
        })
    }

    /// Runs a push's pipeline (every command in it `ignore`d) with `WAIT` at its end.
    pub fn pipe_sync(&self, conn: &mut SyncConn, mut pipe: redis::Pipeline) -> Result<()> {
        self.append(&mut pipe);
        let (reached,): (i64,) = conn.pipe(&pipe)?;
        self.check(reached)
    }

    /// The same on an async connection.
    pub async fn pipe(&self, conn: &mut Conn, mut pipe: redis::Pipeline) -> Result<()> {
        self.append(&mut pipe);
        let (reached,): (i64,) = conn.pipe(&pipe).await?;
        self.check(reached)
    }

    /// Runs a push's script with `WAIT` after it in the same pipeline, and returns the script's
    /// reply. A server that does not have the script yet (`NOSCRIPT`: it did not run, nothing was
    /// written) gets it loaded, and the pipeline is sent once more.
    pub fn script_sync<T: FromRedisValue>(
        &self,
        conn: &mut SyncConn,
        invocation: &redis::ScriptInvocation<'_>,
    ) -> Result<T> {
        self.script_sync_if(conn, invocation, |_| true)
    }

    /// [`WaitReplicas::script_sync`] for a script that may write nothing (its reply says, by
    /// `wrote`): a reply that wrote nothing is returned whatever `WAIT` answered.
    pub fn script_sync_if<T: FromRedisValue>(
        &self,
        conn: &mut SyncConn,
        invocation: &redis::ScriptInvocation<'_>,
        wrote: impl Fn(&T) -> bool,
    ) -> Result<T> {
        let mut pipe = redis::pipe();
        pipe.invoke_script(invocation);
        self.append(&mut pipe);
        let (reply, reached): (T, i64) = match conn.pipe(&pipe) {
            Err(e) if is_noscript(&e) => {
                conn.load_script(invocation)?;
                conn.pipe(&pipe)?
            }
            other => other?,
        };
        if wrote(&reply) {
            self.check(reached)?;
        }
        Ok(reply)
    }
}

/// Runs a push's pipeline on a caller's connection, waiting for replicas when configured.
pub fn pipe_sync(conn: &mut SyncConn, pipe: redis::Pipeline) -> Result<()> {
    match conn.wait_replicas() {
        None => conn.pipe(&pipe),
        Some(wait) => wait.pipe_sync(conn, pipe),
    }
}

/// Runs a push's script on a caller's connection, waiting for replicas when configured.
pub fn script_sync<T: FromRedisValue>(
    conn: &mut SyncConn,
    invocation: &redis::ScriptInvocation<'_>,
) -> Result<T> {
    match conn.wait_replicas() {
        None => conn.script(invocation),
        Some(wait) => wait.script_sync(conn, invocation),
    }
}

/// [`script_sync`] for a script whose reply says whether it wrote anything (`wrote`).
pub fn script_sync_if<T: FromRedisValue>(
    conn: &mut SyncConn,
    invocation: &redis::ScriptInvocation<'_>,
    wrote: impl Fn(&T) -> bool,
) -> Result<T> {
    match conn.wait_replicas() {
        None => conn.script(invocation),
        Some(wait) => wait.script_sync_if(conn, invocation, wrote),
    }
}

/// Runs a push's hand-built `EVALSHA` of `script` (loading it if the server lacks it) on a caller's
/// connection, waiting for replicas when configured and the reply says it wrote (`wrote`).
pub fn evalsha_sync_if<T: FromRedisValue>(
    conn: &mut SyncConn,
    script: &redis::Script,
    cmd: &redis::Cmd,
    wrote: impl Fn(&T) -> bool,
) -> Result<T> {
    let Some(wait) = conn.wait_replicas() else {
        return conn.evalsha(script, cmd);
    };
    let mut pipe = redis::pipe();
    pipe.add_command(cmd.clone());
    wait.append(&mut pipe);
    let (reply, reached): (T, i64) = match conn.pipe(&pipe) {
        Err(e) if is_noscript(&e) => {
            conn.load_script(&script.prepare_invoke())?;
            conn.pipe(&pipe)?
        }
        other => other?,
    };
    if wrote(&reply) {
        wait.check(reached)?;
    }
    Ok(reply)
}

/// A script the server did not have: nothing ran.
fn is_noscript(e: &Error) -> bool {
    let Error::Redis {
        source: Some(e), ..
    } = e
    else {
        return false;
    };
    e.code() == Some("NOSCRIPT")
        || e.clone()
            .into_server_errors()
            .is_some_and(|errors| errors.iter().any(|(_, err)| err.code() == "NOSCRIPT"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_zero_replicas_and_a_zero_timeout() {
        assert!(WaitReplicas::new(0, DEFAULT_TIMEOUT).is_err());
        assert!(WaitReplicas::new(1, Duration::ZERO).is_err());
        assert!(WaitReplicas::new(1, Duration::from_millis(1)).is_ok());
    }

    #[test]
    fn fewer_replicas_than_wanted_is_a_replication_error_naming_both_and_the_timeout() {
        let wait = WaitReplicas::new(2, Duration::from_millis(250)).expect("valid");
        assert!(wait.check(2).is_ok());
        assert!(wait.check(3).is_ok());
        let e = wait.check(1).expect_err("one of two");
        assert!(!e.is_connection());
        let text = e.to_string();
        assert!(text.contains("2 replica"), "{text}");
        assert!(text.contains("only 1"), "{text}");
        assert!(text.contains("250 ms"), "{text}");
    }
}
