//! Queue pausing (`JobQueue::Queue#pause!`, Sidekiq Pro's names): pushes go on, jobs wait, and every
//! server process stops taking from a paused queue within a second.
//!
//! The state is one Redis set of queue names ([`crate::keys::Keys::paused`]). Where it is honoured:
//! - **Batch fetches**: `fetch.lua` and `ordered_fetch.lua` read the set inside the script, so once
//!   [`pause`] has returned no fetch takes from the queue, and the check costs a command inside a call
//!   already made (one per fetch, not per job), never a round trip.
//! - **Idle waiters** (`fetch/idle.rs`), whose `BLMOVE` cannot look at anything: each process keeps
//!   the paused flags of its own queues ([`PausedFlags`]), refreshed by [`watch`] every [`REFRESH`].
//!   A waiter is not armed on a paused queue, and one that is blocked when its queue is paused is
//!   ended with `CLIENT UNBLOCK` (no job moved). A job it took in the refresh's blind spot goes back.
//! - **Prefetched jobs**: a fetcher hands the unstarted jobs of a paused queue back to the head of
//!   their queue before its next job starts (`Fetcher::next`), as a higher queue's look-up does.
//!
//! Unpausing needs no signal either: the next refresh re-arms the waiters, which take the queue's
//! waiting jobs at once and wake parked threads; busy threads find them at their next fetch.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use crate::error::Result;
use crate::fetch::{FetchShared, QueueOrder};
use crate::link::connection::Conn;

/// How often a server process reads the paused set: the bound on how long an idle waiter may still
/// take from a queue after it was paused, and on how long it waits to re-arm after an unpause.
pub const REFRESH: Duration = Duration::from_millis(250);

/// Pauses `queue` for every process. Whether it was running until now.
pub async fn pause(conn: &mut Conn, queue: &str) -> Result<bool> {
    crate::client::check_queue_name(queue)?;
    let key = conn.keys().paused();
    let added: i64 = conn.cmd(redis::cmd("SADD").arg(key).arg(queue)).await?;
    Ok(added > 0)
}

/// Lets every process take from `queue` again. Whether it was paused until now.
pub async fn unpause(conn: &mut Conn, queue: &str) -> Result<bool> {
    let key = conn.keys().paused();
    let removed: i64 = conn.cmd(redis::cmd("SREM").arg(key).arg(queue)).await?;
    Ok(removed > 0)
}

/// The paused queue names, sorted.
pub async fn paused(conn: &mut Conn) -> Result<Vec<String>> {
    let key = conn.keys().paused();
    let mut names: Vec<String> = conn.cmd(redis::cmd("SMEMBERS").arg(key)).await?;
    names.sort();
    Ok(names)
}

/// Which of one process's queues are paused, by queue index, as the last refresh saw them. Read
/// without locking by the idle waiters and by every fetcher before each job.
#[derive(Debug)]
pub struct PausedFlags {
    flags: Vec<AtomicBool>,
}

/// What a refresh changed: queue indexes newly paused and newly unpaused.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Change {
    pub paused: Vec<usize>,
    pub resumed: Vec<usize>,
}

impl PausedFlags {
    /// Flags for `queues` queues, none paused.
    pub fn new(queues: usize) -> PausedFlags {
        PausedFlags {
            flags: (0..queues).map(|_| AtomicBool::new(false)).collect(),
        }
    }

    pub fn is_paused(&self, index: usize) -> bool {
        self.flags
            .get(index)
            .is_some_and(|f| f.load(Ordering::Acquire))
    }

    /// Sets each queue of `order` paused or not from the paused `names`; returns what changed.
    pub fn set(&self, order: &QueueOrder, names: &HashSet<String>) -> Change {
        let mut change = Change::default();
        for (index, (name, flag)) in order.names().zip(&self.flags).enumerate() {
            let now = names.contains(name);
            if flag.swap(now, Ordering::AcqRel) != now {
                if now {
                    change.paused.push(index);
                } else {
                    change.resumed.push(index);
                }
            }
        }
        change
    }
}

/// Reads the paused set into the process's flags; ends the `BLMOVE` of any waiter whose queue was
/// just paused, and wakes the waiters of queues just unpaused.
pub async fn refresh(conn: &mut Conn, shared: &FetchShared) -> Result<Change> {
    let names: HashSet<String> = paused(conn).await?.into_iter().collect();
    let change = shared.paused.set(&shared.order, &names);
    for &index in &change.paused {
        let queue = shared.order.name(index);
        tracing::info!(queue = %queue, "queue paused; no more fetching from it");
        if let Some(id) = shared.blocked_client(queue) {
            let unblock = redis::cmd("CLIENT")
                .arg("UNBLOCK")
                .arg(id)
                .arg("TIMEOUT")
                .clone();
            conn.cmd::<i64>(&unblock).await?;
        }
    }
    for &index in &change.resumed {
        tracing::info!(queue = %shared.order.name(index), "queue unpaused");
    }
    if !change.resumed.is_empty() {
        shared.idle_wakeup.notify_waiters();
    }
    Ok(change)
}

/// Refreshes the paused flags every [`REFRESH`] until stopped. A failure is logged once, not four
/// times a second, until a refresh succeeds again.
pub async fn watch(mut conn: Conn, shared: Arc<FetchShared>, mut stop: watch::Receiver<bool>) {
    let mut failing = false;
    loop {
        tokio::select! {
            _ = stop.changed() => return,
            _ = tokio::time::sleep(REFRESH) => {
                match refresh(&mut conn, &shared).await {
                    Ok(_) if failing => {
                        failing = false;
                        tracing::info!("paused queues read again");
                    }
                    Ok(_) => {}
                    Err(e) if !failing => {
                        failing = true;
                        tracing::warn!(error = %e, "cannot read the paused queues; keeping the last known");
                    }
                    Err(_) => {}
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refresh_reports_what_changed() {
        let order = QueueOrder::new(
            vec![("a".into(), 1), ("b".into(), 1), ("c".into(), 1)],
            true,
        )
        .expect("order");
        let flags = PausedFlags::new(order.len());
        let names = |n: &[&str]| n.iter().map(|s| s.to_string()).collect::<HashSet<_>>();
        assert_eq!(
            flags.set(&order, &names(&["b", "other"])),
            Change {
                paused: vec![1],
                resumed: vec![]
            }
        );
        assert!(flags.is_paused(1) && !flags.is_paused(0) && !flags.is_paused(9));
        assert_eq!(flags.set(&order, &names(&["b"])), Change::default());
        assert_eq!(
            flags.set(&order, &names(&["a"])),
            Change {
                paused: vec![0],
                resumed: vec![1]
            }
        );
    }
}
