//! Liveness: each process proves it is alive, and the work of dead processes goes back on its queues.
//!
//! Every process beats into the `jq:alive` sorted set (scored by the Redis server's clock) every
//! [`BEAT_INTERVAL`], and lists its working lists in `jq:working:<identity>`. A process silent for
//! [`DEAD_AFTER`] is dead: the next beat of any live process sees it and moves each of its working
//! lists back onto the right of its queue, so the orphaned jobs run next. A job is thus back in its
//! queue at most `DEAD_AFTER + BEAT_INTERVAL` after its process died (18 s), well inside the 30 s the
//! design promises, while Sidekiq's own process hash keeps its 60 s expiry.
//!
//! Moving a list is one script per list (`requeue.lua`, `LMOVE` until empty), so two processes
//! recovering the same corpse cannot duplicate a job. If a live process is merely stalled past
//! `DEAD_AFTER` its in-flight jobs run twice (at-least-once), and its next beat re-registers its lists.

use std::time::Duration;

use crate::error::Result;
use crate::fetch::FetchShared;
use crate::keys::Keys;
use crate::link::connection::Conn;
use crate::scripts;

pub const BEAT_INTERVAL: Duration = Duration::from_secs(3);
pub const DEAD_AFTER: Duration = Duration::from_secs(15);

/// The command that records working lists (key, queue) under the process's index; `None` for none.
/// Sent before the lists are first used, on whichever connection the caller has.
pub fn register_cmd(keys: &Keys, identity: &str, lists: &[(String, String)]) -> Option<redis::Cmd> {
    if lists.is_empty() {
        return None;
    }
    let mut cmd = redis::cmd("HSET");
    cmd.arg(keys.working_index(identity));
    for (key, queue) in lists {
        cmd.arg(key).arg(queue);
    }
    Some(cmd)
}

/// Records working lists under the process's index (see [`register_cmd`]).
pub async fn register(conn: &mut Conn, identity: &str, lists: &[(String, String)]) -> Result<()> {
    if let Some(cmd) = register_cmd(&conn.keys().clone(), identity, lists) {
        conn.cmd::<i64>(&cmd).await?;
    }
    Ok(())
}

/// One liveness beat of a running process: beats, re-registers its working lists, and puts back the
/// jobs of every process that stopped beating.
pub async fn beat_and_recover(conn: &mut Conn, shared: &FetchShared) -> Result<()> {
    beat_and_recover_lists(conn, &shared.identity, &shared.working_lists()).await
}

/// [`beat_and_recover`] for process `identity` owning `lists` (every capsule's, `crate::capsules`).
pub async fn beat_and_recover_lists(
    conn: &mut Conn,
    identity: &str,
    lists: &[(String, String)],
) -> Result<()> {
    let dead = beat(conn, Some(identity), lists).await?;
    for identity in dead {
        let moved = recover(conn, &identity).await?;
        tracing::warn!(
            process = %identity,
            jobs = moved,
            "a process stopped beating; its unfinished jobs are back in their queues"
        );
    }
    Ok(())
}

/// Beats for `identity` (or only looks, with `None`) and returns the identities that stopped beating.
pub async fn beat(
    conn: &mut Conn,
    identity: Option<&str>,
    lists: &[(String, String)],
) -> Result<Vec<String>> {
    let keys = conn.keys().clone();
    let mut inv = scripts::BEAT.prepare_invoke();
    inv.key(keys.alive())
        .key(keys.working_index(identity.unwrap_or("")))
        .arg(identity.unwrap_or(""))
        .arg(DEAD_AFTER.as_secs());
    if identity.is_some() {
        for (key, queue) in lists {
            inv.arg(key).arg(queue);
        }
    }
    let dead: Vec<String> = conn.script(&inv).await?;
    Ok(dead
        .into_iter()
        .filter(|d| Some(d.as_str()) != identity)
        .collect())
}

/// Moves every job of `identity`'s working lists back to its queue and forgets the process (its
/// working index and fetch marks). Returns how many jobs moved.
pub async fn recover(conn: &mut Conn, identity: &str) -> Result<usize> {
    let keys = conn.keys().clone();
    let index = keys.working_index(identity);
    let lists: Vec<(String, String)> = conn.cmd(redis::cmd("HGETALL").arg(&index)).await?;
    let mut moved = 0;
    for (working, queue) in &lists {
        let mut inv = scripts::REQUEUE.prepare_invoke();
        inv.key(working)
            .key(keys.queue(queue))
            .key(keys.queues())
            .arg(queue)
            .arg("*");
        let n: usize = conn.script(&inv).await?;
        moved += n;
    }
    // After the jobs are back: each concurrency slot it held is reserved for its recovered job.
    let slots = crate::limits::recover(conn, identity).await?;
    if slots > 0 {
        tracing::info!(process = %identity, slots, "a dead process's concurrency slots are back, reserved for its recovered jobs");
    }
    let mut pipe = redis::pipe();
    pipe.cmd("DEL")
        .arg(&index)
        .arg(keys.fetch_marks(identity))
        .ignore();
    pipe.cmd("ZREM").arg(keys.alive()).arg(identity).ignore();
    conn.pipe::<()>(&pipe).await?;
    tracing::debug!(
        process = %identity,
        lists = lists.len(),
        jobs = moved,
        "recovered working lists"
    );
    Ok(moved)
}
