//! Idle waiters: how a parked process hears of new work at once without polling.
//!
//! One task per queue runs on the shared runtime. While at least one processor thread is parked it
//! issues `BLMOVE queue:<name> → working list RIGHT LEFT` with a short timeout on a connection of its
//! own; Redis answers the moment a job is pushed, the job is already safe in this process's `idle`
//! working list, and the waiter hands it to a parked thread. While every thread is busy the waiters
//! sleep and cost Redis nothing. A `BLMOVE` is never cancelled mid-flight (that could strand a job):
//! the task only stops between commands. To stop without waiting out the timeout, the server sends
//! `CLIENT UNBLOCK` to the published client ids, which ends a `BLMOVE` as if it had timed out (no job
//! moved, none lost).
//!
//! A paused queue's waiter is not armed (`pause.rs` keeps the process's paused flags); pausing ends its
//! `BLMOVE` the same way, and a job it took before the flag was seen goes back to the queue's head.

use std::sync::Arc;
use std::time::Duration;

use crate::error::Result;

use super::{FetchShared, Unit};

/// How long one `BLMOVE` blocks; also bounds how long a quiet process waits for its waiters.
pub const BLOCK_FOR: Duration = Duration::from_secs(2);

/// The slot name of the idle waiters' working lists.
pub const SLOT: &str = "idle";

/// Working lists (key, queue) of the idle waiters, one per queue, in the capsule's idle slot.
pub fn working_lists(shared: &FetchShared) -> Vec<(String, String)> {
    let keys = shared.redis.keys();
    shared
        .order
        .names()
        .map(|q| {
            (
                keys.working(q, &shared.identity, &shared.idle_slot),
                q.to_owned(),
            )
        })
        .collect()
}

/// Runs the waiter of the queue at `index` in the process's order until the process is quiet.
pub async fn run(shared: Arc<FetchShared>, index: usize, working: String) {
    let queue = shared.order.name(index).to_owned();
    let keys = shared.redis.keys().clone();
    let source = keys.queue(&queue);
    let mut conn = shared.redis.blocking_conn();
    while !shared.is_quiet() {
        if shared.idle_threads() == 0 {
            let notified = shared.idle_wakeup.notified();
            // Re-check after arming the notification, so a wake-up in between is not missed.
            if shared.idle_threads() == 0 && !shared.is_quiet() {
                let _ = tokio::time::timeout(Duration::from_secs(1), notified).await;
            }
            continue;
        }
        if shared.paused.is_paused(index) {
            // Re-armed by the refresh that sees the queue unpaused (it wakes the waiters).
            let notified = shared.idle_wakeup.notified();
            if shared.paused.is_paused(index) && !shared.is_quiet() {
                let _ = tokio::time::timeout(Duration::from_secs(1), notified).await;
            }
            continue;
        }
        if let Err(e) = conn.connect().await {
            tracing::warn!(queue = %queue, error = %e, "idle wait cannot connect; retrying");
            tokio::time::sleep(Duration::from_secs(1)).await;
            continue;
        }
        // Published so that a stopping process can end the wait at once with CLIENT UNBLOCK.
        shared.set_blocked_client(&queue, conn.client_id());
        let result: Result<Option<Vec<u8>>> = conn
            .cmd(
                redis::cmd("BLMOVE")
                    .arg(&source)
                    .arg(&working)
                    .arg("RIGHT")
                    .arg("LEFT")
                    .arg(BLOCK_FOR.as_secs_f64()),
            )
            .await;
        shared.set_blocked_client(&queue, None);
        match result {
            Ok(Some(raw)) => {
                tracing::debug!(queue = %queue, "idle wait took a job for an idle thread");
                let unit = Unit::new(index, queue.as_str().into(), raw, working.as_str().into());
                // The process went quiet, or the queue was paused, while the BLMOVE waited: put the
                // job back at the head of its queue, rather than hold it unrun.
                let back = if shared.paused.is_paused(index) {
                    Some(unit)
                } else {
                    shared.hand_off(unit)
                };
                if let Some(unit) = back {
                    if let Err(e) = super::calls::requeue(&mut conn, &[unit]).await {
                        tracing::warn!(queue = %queue, error = %e, "cannot requeue a job taken while going quiet or paused; it goes back when the process stops");
                    }
                }
            }
            Ok(None) => {}
            Err(e) => {
                tracing::warn!(queue = %queue, error = %e, "idle wait failed; retrying");
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    }
}
