//! `perform_async` for ordered jobs: a bulk of jobs merged into the queue by one `ordered_push.lua`
//! call, so a push of a thousand jobs is one round trip and applies entirely or not at all.

use crate::clock::now_f64;
use crate::error::{Error, Result};
use crate::link::blocking::SyncConn;

use super::scripts::PUSH;
use super::{score_arg, OrderedQueue};

/// One job as `perform_async` receives it.
#[derive(Debug, Clone, PartialEq)]
pub struct NewJob {
    /// The entity the job is about; Lowkiq turns any id into its string.
    pub id: String,
    /// Opaque bytes (JSON by default; Marshal when the Ruby side opts in). Lowkiq's default is `""`.
    pub payload: Vec<u8>,
    /// Orders the id's payloads (oldest first) and, for identical payloads, the lowest wins.
    pub score: f64,
    /// Epoch seconds before which the id does not run (unless it is already queued earlier).
    pub perform_in: f64,
}

impl NewJob {
    /// A job with Lowkiq's defaults: score and perform_in are now.
    pub fn now(id: impl Into<String>, payload: impl Into<Vec<u8>>) -> NewJob {
        let now = now_f64();
        NewJob {
            id: id.into(),
            payload: payload.into(),
            score: now,
            perform_in: now,
        }
    }
}

/// The `ordered_push.lua` call that merges `jobs` into `queue`.
pub fn push_invocation(
    queue: &OrderedQueue,
    jobs: &[NewJob],
) -> Result<redis::ScriptInvocation<'static>> {
    let mut inv = PUSH.prepare_invoke();
    inv.arg(queue.keys().prefix());
    for job in jobs {
        inv.arg(&job.id)
            .arg(queue.shard_of(&job.id))
            .arg(&job.payload)
            .arg(score_arg(job.score, "score")?)
            .arg(score_arg(job.perform_in, "perform_in")?);
    }
    Ok(inv)
}

/// Merges `jobs` into `queue` (see the merge rules in [`super`]). Returns how many ids were newly
/// queued (ids already queued only gained payloads).
pub fn push(conn: &mut SyncConn, queue: &OrderedQueue, jobs: &[NewJob]) -> Result<usize> {
    if jobs.is_empty() {
        return Ok(0);
    }
    let inv = push_invocation(queue, jobs)?;
    crate::link::wait_replicas::script_sync(conn, &inv).map_err(|e| match e {
        Error::Redis { message, source } => Error::Redis {
            message: format!("push to ordered queue {:?}: {message}", queue.name()),
            source,
        },
        other => other,
    })
}
