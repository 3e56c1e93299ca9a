//! Reliable fetch: how a processor thread gets its next job without any crash losing it, and without a
//! crash re-running more than the jobs that were running.
//!
//! A job leaves `queue:<name>` only by moving into a working list that belongs to one fetcher of one
//! live process (`jq:working:<identity>:<slot>:<queue>`), and leaves the working list only when it is
//! acknowledged (done, or filed in `retry`/`dead`). A process that dies leaves its working lists
//! behind; [`crate::liveness`] pushes them back onto their queues once the process stops beating.
//!
//! The rooms:
//! - [`shared`]: what every fetcher of a process shares — the idle hand-off, stealing, the running
//!   jobs the heartbeat publishes, the working-list index;
//! - [`fetcher`]: one processor thread's fetcher, on its own synchronous connection;
//! - [`pace`]: how big a batch is and when a batch must make way for a higher queue (pure logic);
//! - [`calls`]: the Redis calls of fetching, acknowledging and handing back;
//! - [`order`]: the queue order of a fetch, strict or weighted as Sidekiq defines it;
//! - [`idle`]: the blocking waiters that hand new work to parked threads.
//!
//! The hot path is batched, sized to the work: one `fetch.lua` call takes about fifty milliseconds
//! of work (from the measured durations of the queue's jobs, up to `max_batch`), so blank jobs cost
//! Redis one round trip per `max_batch` (100 by default), 1 ms jobs one per ~25-50, 10 ms jobs one
//! per ~4, while a 60 ms job is fetched alone, as in Sidekiq. Each job's
//! acknowledgement is written to the socket the moment the job finishes, without waiting for a reply,
//! so a `kill -9` re-runs only the jobs that were running. A batch older than a few milliseconds looks
//! at the higher queues before its next job starts, and hands its unstarted jobs back when they have
//! work, so prefetching never makes a higher queue wait.
//!
//! A paused queue ([`crate::pause`]) is skipped by `fetch.lua` itself; the idle waiters and the
//! prefetched jobs follow the process's paused flags, refreshed every 250 ms.

pub mod calls;
pub mod fetcher;
pub mod idle;
pub mod order;
pub mod pace;
pub mod shared;

pub use fetcher::Fetcher;
pub use order::QueueOrder;
pub use shared::{Busy, FetchShared};

use std::sync::Arc;

use crate::batch::Member;
use crate::job_outline::Outline;

/// One job a fetcher holds: where it came from, its bytes, and the working list that keeps it safe
/// until it is acknowledged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unit {
    /// Index of its queue in the process's [`QueueOrder`].
    pub index: usize,
    /// Shared by the jobs of a batch (as `working` is): a count, not a copy, per job.
    pub queue: Arc<str>,
    pub raw: Vec<u8>,
    /// The working list that holds it until it is acknowledged.
    pub working: Arc<str>,
    /// Its idempotency key went out with its batch's early releases (`until_executing`), so nothing
    /// is left to release when it starts.
    pub key_released: bool,
    /// Its batch membership (`batch/`), read once as it is taken: a fetch's reply is parsed with the
    /// GVL released, where its acknowledgement would read it with the GVL held. `None`: in no batch.
    pub batch: Option<Member>,
    /// Its JSON checked and outlined as it is taken, with the GVL released ([`Outline`]): a
    /// processor that runs it itself then builds only the values it reads. `None`: JSON the
    /// binding's reader declines, or no object.
    pub outline: Option<Outline>,
}

impl Unit {
    /// A job just taken from queue `index` (`queue`) into the working list `working`.
    pub fn new(index: usize, queue: Arc<str>, raw: Vec<u8>, working: Arc<str>) -> Unit {
        let batch = Member::of(&raw);
        let outline = Outline::of(&raw);
        Unit {
            index,
            queue,
            raw,
            working,
            key_released: false,
            batch,
            outline,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_taken_job_carries_its_batch_membership() {
        let unit = |raw: &[u8]| Unit::new(0, "default".into(), raw.to_vec(), "w".into());
        let member = unit(br#"{"class":"W","args":[],"jid":"j1","bid":"b1","retry_count":0}"#)
            .batch
            .expect("a member");
        assert_eq!((member.bid(), member.jid()), ("b1", "j1"));
        assert!(member.failed_before);
        assert_eq!(
            unit(br#"{"class":"W","args":[{"bid":"x"}],"jid":"j"}"#).batch,
            None
        );
        assert!(!unit(br#"{"class":"W","args":[],"jid":"j"}"#).key_released);
    }
}
