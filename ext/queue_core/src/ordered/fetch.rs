//! Fetching ordered jobs: one `ordered_fetch.lua` call picks a shard among those the caller holds,
//! takes up to a batch of its due ids (oldest `perform_in` first) and moves each id's state into the
//! `processing:*` keys, returning `{id => payloads sorted by score}` with each id's retry count.
//!
//! **Prefetch.** A fetch may take several batches' worth of ids of its shard (`with_prefetch`), sized
//! by a [`Pace`] as plain fetches are: about [`crate::fetch::pace::BATCH_BUDGET`] of work, from the
//! measured time between a fetch and the settle of what it took. The caller runs them `batch_size`
//! at a time and settles them together with the next fetch, so blank ids at batch 1 cost one round
//! trip per twenty, not one each; a slow worker is fetched a batch at a time, as before. The ids in
//! hand are in processing, so nothing else runs them meanwhile — and a shard's ids are fetched by one
//! thread anyway, so holding them takes no work from a sibling.
//!
//! A paused queue (`pause.rs`) gives nothing: the script looks its name up in the paused set first,
//! inside the same call. The ids already in hand (at most a fetch's ~2 ms of work) still run.
//!
//! Schedulers (Lowkiq's two): [`Scheduler::Lag`] (the default) picks the shard whose oldest due id is
//! oldest; [`Scheduler::Seq`] goes round the shards, starting one further on each call. Both decide
//! inside the script, so picking costs no extra round trip.

use std::time::Instant;

use redis::Value;

use crate::error::{Error, Result};
use crate::fetch::pace::Pace;
use crate::link::blocking::SyncConn;

use super::scripts::{FETCH, SETTLE_FETCH};
use super::settle::{parse_settled, settle, settle_args, settle_args_len, Outcome, Settled};
use super::{reply_array, reply_f64, reply_payloads, reply_string, OrderedQueue, Payload};

/// Most ids one prefetching fetch takes. The pace's time budget is what limits it for any job that
/// does work; this bounds the script's run for blank ones (Redis runs nothing else meanwhile).
pub const MAX_PREFETCH: usize = 20;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Scheduler {
    /// The shard with the oldest due id: minimises lag.
    #[default]
    Lag,
    /// Round-robin over the shards.
    Seq,
}

/// One id taken into processing.
#[derive(Debug, Clone, PartialEq)]
pub struct Fetched {
    pub id: String,
    /// -1 if it never failed; 0 after its first failure.
    pub retry_count: i64,
    pub perform_in: f64,
    /// Oldest (lowest score) first.
    pub payloads: Vec<Payload>,
}

/// What one fetch took: ids of a single shard, which the caller settles together.
#[derive(Debug, Clone, PartialEq)]
pub struct Batch {
    pub shard: u32,
    pub jobs: Vec<Fetched>,
}

/// One processor thread's fetcher for one ordered queue.
#[derive(Debug, Clone)]
pub struct OrderedFetcher {
    queue: OrderedQueue,
    identity: String,
    scheduler: Scheduler,
    batch_size: usize,
    turn: usize,
    /// How many batches the next fetch takes, from the time batches took to run.
    pace: Pace,
    /// When the ids in hand were fetched, and how many batches they make.
    in_hand: Option<(Instant, usize)>,
}

impl OrderedFetcher {
    /// `identity` is the process's (its leases are checked by the script); `batch_size` ids at most
    /// per fetch (Lowkiq's default is 1).
    pub fn new(
        queue: OrderedQueue,
        identity: &str,
        scheduler: Scheduler,
        batch_size: usize,
    ) -> Result<OrderedFetcher> {
        if batch_size == 0 {
            return Err(Error::InvalidArgument(
                "batch_size must be at least 1".to_owned(),
            ));
        }
        Ok(OrderedFetcher {
            queue,
            identity: identity.to_owned(),
            scheduler,
            batch_size,
            turn: 0,
            pace: Pace::new(1, 1),
            in_hand: None,
        })
    }

    /// Lets one fetch take up to [`MAX_PREFETCH`] ids (whole batches, at least one) when the
    /// worker's batches run fast enough: see the module's "Prefetch".
    pub fn with_prefetch(mut self) -> OrderedFetcher {
        self.pace = Pace::new(1, (MAX_PREFETCH / self.batch_size).max(1));
        self
    }

    /// Most ids the next fetch takes.
    pub fn fetch_size(&self) -> usize {
        self.batch_size * self.pace.batch_for(0)
    }

    /// The ids in hand were settled: their batches' time feeds the pace.
    fn ran(&mut self, outcomes: &[(String, Outcome)]) {
        let Some((fetched, batches)) = self.in_hand.take() else {
            return;
        };
        if outcomes.iter().any(|(_, o)| *o != Outcome::PutBack) {
            self.pace.record(
                0,
                fetched.elapsed() / u32::try_from(batches.max(1)).unwrap_or(u32::MAX),
            );
        }
    }

    fn took(&mut self, batch: &Option<Batch>) {
        self.in_hand = batch
            .as_ref()
            .map(|b| (Instant::now(), b.jobs.len().div_ceil(self.batch_size)));
    }

    pub fn queue(&self) -> &OrderedQueue {
        &self.queue
    }

    /// Takes due ids from one of `shards` (those this thread serves, from
    /// [`super::lease::Ownership::fetchable`]); `None` when none of them has a due id that is not
    /// already in processing.
    pub fn fetch(&mut self, conn: &mut SyncConn, shards: &[u32]) -> Result<Option<Batch>> {
        if shards.is_empty() {
            return Ok(None);
        }
        let mut inv = FETCH.prepare_invoke();
        inv.key(self.queue.keys().leases())
            .key(self.queue.keys().paused());
        self.fetch_args(&mut inv, shards);
        let reply: Value = conn.script(&inv)?;
        let batch = parse_batch(reply)?;
        self.took(&batch);
        Ok(batch)
    }
}

impl OrderedFetcher {
    /// Settles `settled` (ids this process fetched from one shard) and fetches the next batch, in one
    /// round trip: at batch 1 a job then costs its push and this one call. `settled` may be `None`
    /// (the first fetch). Shards as for [`OrderedFetcher::fetch`]; with none, only settles.
    pub fn settle_and_fetch(
        &mut self,
        conn: &mut SyncConn,
        settled: Option<(u32, &[(String, Outcome)])>,
        max_retry_count: u32,
        shards: &[u32],
    ) -> Result<(Settled, Option<Batch>)> {
        let settled = settled.filter(|(_, outcomes)| !outcomes.is_empty());
        if let Some((_, outcomes)) = settled {
            self.ran(outcomes);
        }
        if shards.is_empty() {
            let s = match settled {
                Some((shard, outcomes)) => settle(
                    conn,
                    &self.queue,
                    &self.identity,
                    shard,
                    outcomes,
                    max_retry_count,
                )?,
                None => Settled::default(),
            };
            return Ok((s, None));
        }
        let mut inv = SETTLE_FETCH.prepare_invoke();
        inv.key(self.queue.keys().leases())
            .key(self.queue.keys().paused());
        match settled {
            Some((shard, outcomes)) => {
                inv.arg(settle_args_len(outcomes));
                settle_args(
                    &mut inv,
                    &self.queue,
                    &self.identity,
                    shard,
                    outcomes,
                    max_retry_count,
                )?;
            }
            None => {
                inv.arg(0);
            }
        }
        self.fetch_args(&mut inv, shards);
        let reply: Value = conn.script(&inv)?;
        let mut parts = reply_array(reply, "ordered settle and fetch")?.into_iter();
        let (Some(s), Some(f)) = (parts.next(), parts.next()) else {
            return Err(Error::redis(
                "ordered settle and fetch returned a short reply",
            ));
        };
        let s = match s {
            Value::Int(0) => Settled::default(),
            other => parse_settled(other)?,
        };
        let batch = parse_batch(f)?;
        self.took(&batch);
        Ok((s, batch))
    }

    /// Appends the fetch script's arguments (see `ordered_fetch.lua`), advancing the seq rotation.
    fn fetch_args(&mut self, inv: &mut redis::ScriptInvocation<'_>, shards: &[u32]) {
        let order = match self.scheduler {
            Scheduler::Lag => shards.to_vec(),
            Scheduler::Seq => {
                self.turn = self.turn.wrapping_add(1);
                rotated(shards, self.turn)
            }
        };
        inv.arg(self.queue.keys().prefix())
            .arg(&self.identity)
            .arg(match self.scheduler {
                Scheduler::Lag => "lag",
                Scheduler::Seq => "seq",
            })
            .arg(self.fetch_size())
            .arg(self.queue.keys().queue());
        for s in &order {
            inv.arg(*s);
        }
    }
}

/// `shards` starting at position `turn % len`: the seq scheduler's order for one call.
pub fn rotated(shards: &[u32], turn: usize) -> Vec<u32> {
    if shards.is_empty() {
        return Vec::new();
    }
    let start = turn % shards.len();
    shards[start..]
        .iter()
        .chain(&shards[..start])
        .copied()
        .collect()
}

fn parse_batch(reply: Value) -> Result<Option<Batch>> {
    let mut items = reply_array(reply, "ordered fetch")?.into_iter();
    let Some(shard) = items.next() else {
        return Ok(None);
    };
    let shard = reply_string(shard, "fetched shard")?;
    let shard: u32 = shard
        .parse()
        .map_err(|_| Error::redis(format!("ordered fetch returned shard {shard:?}")))?;
    let mut jobs = Vec::new();
    for item in items {
        let mut parts = reply_array(item, "fetched id")?.into_iter();
        let (Some(id), Some(retry), Some(perform_in), Some(payloads)) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(Error::redis("ordered fetch returned a short entry"));
        };
        jobs.push(Fetched {
            id: reply_string(id, "fetched id")?,
            retry_count: reply_f64(retry, "retry_count")? as i64,
            perform_in: reply_f64(perform_in, "perform_in")?,
            payloads: reply_payloads(payloads, "fetched payloads")?,
        });
    }
    // Due ids may all have been skipped (in processing) or sent to the morgue (bad data).
    if jobs.is_empty() {
        return Ok(None);
    }
    Ok(Some(Batch { shard, jobs }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seq_rotates_one_further_each_turn() {
        assert_eq!(rotated(&[1, 4, 7], 0), vec![1, 4, 7]);
        assert_eq!(rotated(&[1, 4, 7], 1), vec![4, 7, 1]);
        assert_eq!(rotated(&[1, 4, 7], 5), vec![7, 1, 4]);
        assert!(rotated(&[], 3).is_empty());
    }

    #[test]
    fn parses_a_batch_reply() {
        let reply = Value::Array(vec![
            Value::BulkString(b"3".to_vec()),
            Value::Array(vec![
                Value::BulkString(b"42".to_vec()),
                Value::BulkString(b"-1".to_vec()),
                Value::BulkString(b"1700000000.5".to_vec()),
                Value::Array(vec![
                    Value::BulkString(b"a".to_vec()),
                    Value::BulkString(b"1".to_vec()),
                    Value::BulkString(b"b".to_vec()),
                    Value::BulkString(b"2.5".to_vec()),
                ]),
            ]),
        ]);
        let batch = parse_batch(reply).unwrap().unwrap();
        assert_eq!(batch.shard, 3);
        assert_eq!(
            batch.jobs,
            vec![Fetched {
                id: "42".into(),
                retry_count: -1,
                perform_in: 1_700_000_000.5,
                payloads: vec![(b"a".to_vec(), 1.0), (b"b".to_vec(), 2.5)],
            }]
        );
        assert_eq!(parse_batch(Value::Array(vec![])).unwrap(), None);
    }
}
