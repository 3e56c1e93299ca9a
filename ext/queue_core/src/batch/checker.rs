//! The batch checker: one task per server that counts the markers the acks leave (`jq:batch-acks`,
//! pushed in the `MULTI` that acknowledges a job) and applies the transitions (and the markers of
//! servers before it, on `jq:batch-checks`, at least every `WAIT_SECS`). It waits for a
//! marker with `BRPOPLPUSH` of the list onto itself (which only rotates it; a command of its own, so
//! `CLIENT LIST` tells this wait from the idle waiters' `BLMOVE`), then runs `batch_check.lua`,
//! which pops markers and applies them in the same step, so a marker is applied once, by one
//! server, and survives any crash until then. A job is counted once per jid (`<bid>:done`) and the
//! transitions are idempotent besides (`HSETNX` guards), so nothing counts or fires twice.

use std::time::Duration;

use redis::ScriptInvocation;
use tokio::sync::watch;

use crate::clock::{float_string, now_f64};
use crate::error::Result;
use crate::keys::Keys;
use crate::link::connection::Conn;
use crate::scripts;

/// Markers one script call takes at most (counted in bulk per batch: ~0.3 µs of Redis each).
pub const PER_CALL: i64 = 1000;
/// How long one wait blocks before it is issued again. A stopping server drops the wait mid-flight:
/// it moves the list onto itself, so a dropped one changes nothing.
const WAIT_SECS: f64 = 5.0;
/// Pause after a failed step (Redis unreachable).
const AFTER_ERROR: Duration = Duration::from_secs(1);

/// Runs until `stop` says so.
pub async fn run(mut waiter: Conn, mut worker: Conn, mut stop: watch::Receiver<bool>) {
    loop {
        if *stop.borrow() {
            return;
        }
        let result = tokio::select! {
            r = step(&mut waiter, &mut worker) => r,
            _ = stop.changed() => return,
        };
        if let Err(e) = result {
            tracing::warn!(error = %e, "batch checker step failed; trying again");
            tokio::select! {
                _ = tokio::time::sleep(AFTER_ERROR) => {}
                _ = stop.changed() => {}
            }
        }
    }
}

async fn step(waiter: &mut Conn, worker: &mut Conn) -> Result<()> {
    let acks = waiter.keys().batch_acks();
    // Woken by a marker or timed out: either way a step runs, so the markers of servers before
    // `jq:batch-acks` (which wake no one) are applied within `WAIT_SECS`.
    let _woken_by: Option<String> = waiter
        .cmd(
            redis::cmd("BRPOPLPUSH")
                .arg(&acks)
                .arg(&acks)
                .arg(WAIT_SECS),
        )
        .await?;
    loop {
        let taken: i64 = worker.script(&invocation(worker.keys())).await?;
        if taken < PER_CALL {
            return Ok(());
        }
    }
}

/// One call of `batch_check.lua`: up to [`PER_CALL`] markers taken and applied.
pub fn invocation(keys: &Keys) -> ScriptInvocation<'static> {
    let mut inv = scripts::BATCH_CHECK.prepare_invoke();
    inv.key(keys.batch_acks())
        .key(keys.batch_checks())
        .arg(keys.namespace())
        .arg(float_string(now_f64()))
        .arg(PER_CALL);
    inv
}
