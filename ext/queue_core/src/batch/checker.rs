//! The batch checker: one task per server that counts what the acks recorded and applies the
//! transitions. An ack of a job that never failed adds its jid to `<bid>:ok` and its bid to
//! `jq:batch-dirty`; the rarer acks leave a marker on `jq:batch-news`; servers of the versions
//! before left theirs on `jq:batch-acks` and `jq:batch-checks`. One step (`batch_check.lua`) pops
//! all of these and applies them in the same script, so an entry is applied once, by one server,
//! and survives any crash until then; per batch, how far its set grew is what it counts.
//!
//! Waking costs Redis nothing: an ack written by this process calls [`wake`] (an in-memory
//! notification; `Fetcher::acknowledge`), and the checker steps while acks keep being written,
//! [`PAUSE`] apart, so one step counts the acks of many jobs: a step's fixed cost (a script call, a
//! few commands per batch) is spread over them, and a callback waits at most that much longer. An
//! ack may reach Redis after it was written (it waits for its thread's next call, ~200 ms at most
//! in the kernel): the checker keeps stepping for [`GRACE`] after the last ack, the pause doubling
//! while steps find nothing. Idle, it steps every [`IDLE_STEP`]: for the entries of servers of the
//! version before and of a server that died before its own checker counted its acks.
//!
//! A job is counted once (its jid in `<bid>:ok`, or `<bid>:done` for the version before) and the
//! transitions are idempotent besides (`HSETNX` guards), so nothing counts or fires twice.

use std::sync::LazyLock;
use std::time::{Duration, Instant};

use redis::ScriptInvocation;
use tokio::sync::{watch, Notify};

use crate::clock::{float_string, now_f64};
use crate::error::Result;
use crate::keys::Keys;
use crate::link::connection::Conn;
use crate::scripts;

/// Entries one script call takes at most from each list and from the dirty set.
pub const PER_CALL: i64 = 1000;
/// The pause between steps while acks keep being written.
pub const PAUSE: Duration = Duration::from_millis(8);
/// The longest pause between steps while the checker is awake.
const MOST_PAUSE: Duration = Duration::from_millis(32);
/// How long the checker stays awake after the last ack this process wrote: longer than an ack can
/// wait to reach Redis (the kernel holds a corked write 200 ms at most).
pub const GRACE: Duration = Duration::from_millis(400);
/// How often an idle checker steps anyway.
pub const IDLE_STEP: Duration = Duration::from_secs(1);
/// Pause after a failed step (Redis unreachable).
const AFTER_ERROR: Duration = Duration::from_secs(1);

/// Acks were written in this process: its checker steps soon. An atomic flag when the checker is
/// already awake; never a Redis command.
pub fn wake() {
    NEWS.notify_one();
}

static NEWS: LazyLock<Notify> = LazyLock::new(Notify::new);

/// Whether [`wake`] was called since this was last asked (takes the notification).
async fn woken() -> bool {
    tokio::select! {
        biased;
        _ = NEWS.notified() => true,
        _ = std::future::ready(()) => false,
    }
}

/// Runs until `stop` says so.
pub async fn run(mut conn: Conn, mut stop: watch::Receiver<bool>) {
    // `Some(pause)` while awake (until `awake_until`), `None` idle.
    let mut pause: Option<Duration> = None;
    let mut awake_until = Instant::now();
    loop {
        if *stop.borrow() {
            return;
        }
        let woke = match pause {
            None => tokio::select! {
                _ = NEWS.notified() => true,
                _ = tokio::time::sleep(IDLE_STEP) => false,
                _ = stop.changed() => return,
            },
            Some(p) => {
                tokio::select! {
                    _ = tokio::time::sleep(p) => {}
                    _ = stop.changed() => return,
                }
                woken().await
            }
        };
        let result = tokio::select! {
            r = step(&mut conn) => r,
            _ = stop.changed() => return,
        };
        let now = Instant::now();
        if woke {
            awake_until = now + GRACE;
        }
        pause = match result {
            Ok(taken) if taken > 0 || woke => Some(PAUSE),
            Ok(_) if now < awake_until => Some(pause.map_or(PAUSE, |p| (p * 2).min(MOST_PAUSE))),
            Ok(_) => None,
            Err(e) => {
                tracing::warn!(error = %e, "batch checker step failed; trying again");
                awake_until = now;
                tokio::select! {
                    _ = tokio::time::sleep(AFTER_ERROR) => {}
                    _ = stop.changed() => return,
                }
                None
            }
        };
    }
}

/// One step: everything there is applied, in calls of [`PER_CALL`]. Returns how many entries it
/// took.
async fn step(conn: &mut Conn) -> Result<i64> {
    let mut total = 0;
    loop {
        let taken: i64 = conn.script(&invocation(conn.keys())).await?;
        total += taken;
        if taken < PER_CALL {
            return Ok(total);
        }
    }
}

/// One call of `batch_check.lua`: up to [`PER_CALL`] entries of each list taken and applied.
pub fn invocation(keys: &Keys) -> ScriptInvocation<'static> {
    let mut inv = scripts::BATCH_CHECK.prepare_invoke();
    inv.key(keys.batch_dirty())
        .key(keys.batch_news())
        .key(keys.batch_acks())
        .key(keys.batch_checks())
        .arg(keys.namespace())
        .arg(float_string(now_f64()))
        .arg(PER_CALL);
    inv
}
