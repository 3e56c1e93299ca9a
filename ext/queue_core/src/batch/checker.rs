//! The batch checker: one task per server that counts what the acks leave (`jq:batch-news`: the
//! batches whose jobs' acks recorded them, and the markers of the rarer acks) and applies the transitions,
//! with the markers of servers before it (`jq:batch-acks`, `jq:batch-checks`) in the same step. It
//! waits for news with `BRPOPLPUSH` of the list onto itself (which only rotates it; a command of its
//! own, so `CLIENT LIST` tells this wait from the idle waiters' `BLMOVE`), then runs
//! `batch_check.lua`, which pops entries and applies them in the same step, so an entry is applied
//! once, by one server, and survives any crash until then. While news keeps coming it does not wait
//! but pauses [`PAUSE`] between steps, so one step counts the acks of many jobs: a step's fixed cost
//! (a script call, a few commands per batch) is spread over them, and a callback waits at most that
//! much longer. A job is counted once (its jid in `<bid>:ok`, or `<bid>:done` for the version
//! before) and the transitions are idempotent besides (`HSETNX` guards), so nothing counts or fires
//! twice.

use std::time::Duration;

use redis::ScriptInvocation;
use tokio::sync::watch;

use crate::clock::{float_string, now_f64};
use crate::error::Result;
use crate::keys::Keys;
use crate::link::connection::Conn;
use crate::scripts;

/// Entries one script call takes at most from each list (`b<bid>` ones cost ~0.1 µs of Redis).
pub const PER_CALL: i64 = 1000;
/// How long one wait blocks before it is issued again. A stopping server drops the wait mid-flight:
/// it moves the list onto itself, so a dropped one changes nothing. The lists of servers before
/// `jq:batch-news` wake no one: their entries are applied within this.
const WAIT_SECS: f64 = 5.0;
/// The pause between steps while news keeps coming.
pub const PAUSE: Duration = Duration::from_millis(2);
/// Pause after a failed step (Redis unreachable).
const AFTER_ERROR: Duration = Duration::from_secs(1);

/// Runs until `stop` says so.
pub async fn run(mut waiter: Conn, mut worker: Conn, mut stop: watch::Receiver<bool>) {
    let mut busy = false;
    loop {
        if *stop.borrow() {
            return;
        }
        let result = tokio::select! {
            r = step(&mut waiter, &mut worker, busy) => r,
            _ = stop.changed() => return,
        };
        let pause = match result {
            Ok(taken) => {
                busy = taken > 0;
                busy.then_some(PAUSE)
            }
            Err(e) => {
                busy = false;
                tracing::warn!(error = %e, "batch checker step failed; trying again");
                Some(AFTER_ERROR)
            }
        };
        if let Some(pause) = pause {
            tokio::select! {
                _ = tokio::time::sleep(pause) => {}
                _ = stop.changed() => {}
            }
        }
    }
}

/// One step: unless the last one found news (`busy`), wait for some; then apply all there is.
/// Returns how many entries it took.
async fn step(waiter: &mut Conn, worker: &mut Conn, busy: bool) -> Result<i64> {
    if !busy {
        let news = waiter.keys().batch_news();
        // Woken by news or timed out: either way a step runs, so the entries of servers before
        // `jq:batch-news` (which wake no one) are applied within `WAIT_SECS`.
        let _woken_by: Option<String> = waiter
            .cmd(
                redis::cmd("BRPOPLPUSH")
                    .arg(&news)
                    .arg(&news)
                    .arg(WAIT_SECS),
            )
            .await?;
    }
    let mut total = 0;
    loop {
        let taken: i64 = worker.script(&invocation(worker.keys())).await?;
        total += taken;
        if taken < PER_CALL {
            return Ok(total);
        }
    }
}

/// One call of `batch_check.lua`: up to [`PER_CALL`] entries of each list taken and applied.
pub fn invocation(keys: &Keys) -> ScriptInvocation<'static> {
    let mut inv = scripts::BATCH_CHECK.prepare_invoke();
    inv.key(keys.batch_news())
        .key(keys.batch_acks())
        .key(keys.batch_checks())
        .arg(keys.namespace())
        .arg(float_string(now_f64()))
        .arg(PER_CALL);
    inv
}
