//! The batch checker: one task per server that applies the transitions the acks' markers ask for
//! (`jq:batch-checks`, written by `batch_ack.lua` in the step that counts a job). It waits for a
//! marker with `BRPOPLPUSH` of the list onto itself (which only rotates it; a command of its own, so
//! `CLIENT LIST` tells this wait from the idle waiters' `BLMOVE`), then runs `batch_check.lua`,
//! which pops markers and applies each in the same step, so a marker is applied once, by one
//! server, and survives any crash until then. The transitions are idempotent besides (`HSETNX`
//! guards), so nothing fires twice.

use std::time::Duration;

use tokio::sync::watch;

use crate::clock::{float_string, now_f64};
use crate::error::Result;
use crate::link::connection::Conn;
use crate::scripts;

/// Markers one script call takes at most.
const PER_CALL: i64 = 100;
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
    let checks = waiter.keys().batch_checks();
    let seen: Option<String> = waiter
        .cmd(
            redis::cmd("BRPOPLPUSH")
                .arg(&checks)
                .arg(&checks)
                .arg(WAIT_SECS),
        )
        .await?;
    if seen.is_none() {
        return Ok(());
    }
    loop {
        let mut inv = scripts::BATCH_CHECK.prepare_invoke();
        inv.key(&checks)
            .arg(worker.keys().namespace())
            .arg(float_string(now_f64()))
            .arg(PER_CALL);
        let taken: i64 = worker.script(&inv).await?;
        if taken < PER_CALL {
            return Ok(());
        }
    }
}
