//! Settling a fetched batch: one `ordered_settle.lua` call for all its ids.
//!
//! Success drops the id's in-flight state and counts `processed`. Failure counts `failed`, increments
//! `retry_count`, sets `perform_in = now + delay` (the caller passes what the worker's Ruby `retry_in`
//! returned for the new count) and keeps the error in `errors`; the id goes back to the queue, merged
//! with whatever was pushed for it meanwhile (payloads union; the failed job's `perform_in` and
//! `retry_count` win). Once `retry_count >= max_retry_count`, the oldest payload goes to the morgue with
//! the error and the rest go back due now with `retry_count` = [`RETRY_COUNT_AFTER_MORGUE`].
//!
//! If the process lost the shard's lease meanwhile (it was silent long enough to be taken for dead),
//! nothing is written: the new owner has put the in-flight state back and will run it again
//! (at-least-once, as for plain jobs). The outcome says so.

use redis::Value;

use crate::error::{Error, Result};
use crate::link::blocking::SyncConn;

use super::scripts::SETTLE;
use super::{reply_array, reply_string, score_arg, OrderedQueue};

/// What the payloads left behind get as `retry_count` after the oldest went to the morgue.
///
/// -1, as the user's document (Lowkiq's README) says, not Lowkiq's code's 0: -1 means "not failed
/// yet", so the next payload gets the same budget of attempts the one sent to the morgue had — it is
/// the job that now runs first, and it has not failed on its own. With 0 each later payload would get
/// one attempt fewer, and the delay of its first retry would be `retry_in(1)`, not `retry_in(0)`.
pub const RETRY_COUNT_AFTER_MORGUE: i64 = -1;

/// How one id of a batch ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    Done,
    Failed {
        /// Kept in `errors` (and in `morgue:errors` if it goes to the morgue).
        error: String,
        /// Seconds until the next attempt: the worker's `retry_in(retry_count + 1)`.
        retry_in: f64,
    },
    /// Not run (its thread died before running it): back to the queue as it was fetched — its
    /// `perform_in`, `retry_count` and error — merged as recovery merges; neither processed nor failed.
    PutBack,
}

/// What a settle did.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Settled {
    /// True when the shard's lease had moved to another process: nothing was written.
    pub lost: bool,
    pub processed: u64,
    pub failed: u64,
    /// Ids whose oldest payload went to the morgue.
    pub morgue: Vec<String>,
}

/// Settles ids fetched together from `shard` (ids no longer in processing are skipped, so a repeated
/// settle is harmless).
pub fn settle(
    conn: &mut SyncConn,
    queue: &OrderedQueue,
    identity: &str,
    shard: u32,
    outcomes: &[(String, Outcome)],
    max_retry_count: u32,
) -> Result<Settled> {
    if outcomes.is_empty() {
        return Ok(Settled::default());
    }
    let mut inv = SETTLE.prepare_invoke();
    inv.key(queue.keys().leases());
    settle_args(&mut inv, queue, identity, shard, outcomes, max_retry_count)?;
    let reply: Value = conn.script(&inv)?;
    parse_settled(reply)
}

/// How many arguments [`settle_args`] adds for `outcomes`.
pub(super) fn settle_args_len(outcomes: &[(String, Outcome)]) -> usize {
    let done = outcomes.iter().filter(|(_, o)| *o == Outcome::Done).count();
    6 + done + 4 * (outcomes.len() - done)
}

/// Appends the settle script's arguments (see `ordered_settle.lua`).
pub(super) fn settle_args(
    inv: &mut redis::ScriptInvocation<'_>,
    queue: &OrderedQueue,
    identity: &str,
    shard: u32,
    outcomes: &[(String, Outcome)],
    max_retry_count: u32,
) -> Result<()> {
    inv.arg(queue.keys().prefix())
        .arg(identity)
        .arg(shard)
        .arg(max_retry_count)
        .arg(RETRY_COUNT_AFTER_MORGUE);
    // The successes as a plain list of ids (most of a settle, and settled together by the script),
    // then the rest in groups of four.
    let done = || outcomes.iter().filter(|(_, o)| *o == Outcome::Done);
    inv.arg(done().count());
    for (id, _) in done() {
        inv.arg(id);
    }
    for (id, outcome) in outcomes {
        match outcome {
            Outcome::Done => continue,
            Outcome::PutBack => inv.arg(id).arg("back").arg("").arg(0),
            Outcome::Failed { error, retry_in } => inv
                .arg(id)
                .arg("fail")
                .arg(error)
                .arg(score_arg(*retry_in, "retry_in")?),
        };
    }
    Ok(())
}

pub(super) fn parse_settled(reply: Value) -> Result<Settled> {
    if let Value::Int(-1) = reply {
        return Ok(Settled {
            lost: true,
            ..Settled::default()
        });
    }
    let mut items = reply_array(reply, "ordered settle")?.into_iter();
    let (Some(Value::Int(processed)), Some(Value::Int(failed)), Some(morgue)) =
        (items.next(), items.next(), items.next())
    else {
        return Err(Error::redis("ordered settle returned a short reply"));
    };
    Ok(Settled {
        lost: false,
        processed: processed.max(0) as u64,
        failed: failed.max(0) as u64,
        morgue: reply_array(morgue, "morgued ids")?
            .into_iter()
            .map(|v| reply_string(v, "morgued id"))
            .collect::<Result<_>>()?,
    })
}
