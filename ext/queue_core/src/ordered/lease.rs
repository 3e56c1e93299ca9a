//! Who fetches which shard.
//!
//! Each shard of a queue has at most one owner at a time: the process named in the queue's lease hash
//! (`jq:ordered:<queue>:leases`, shard → identity). A lease lives as long as its owner beats in the
//! queue's members set (`jq:ordered:<queue>:members`, scored by the Redis server's `TIME`, as
//! `jq:alive` is) — so the beat that [`Ownership::balance`] makes every [`crate::liveness::BEAT_INTERVAL`]
//! renews all of a process's leases at once — and lapses [`crate::liveness::DEAD_AFTER`] after the owner
//! falls silent. A dead owner's shards are taken over within `DEAD_AFTER + 2 × BEAT_INTERVAL` (21 s)
//! of its last beat: at the next beat of the process each falls to, or at the one after when the new
//! assignment first moves a shard between two live processes (one releases, then the other claims).
//!
//! Balancing ([`Splitter::Balanced`]): every live member computes the same assignment from the same
//! sorted member list — shard `s` goes to member `(s + offset) % members`, `offset` being the CRC-32 of
//! the queue name so that the shards 0 of many small queues do not all land on one process — and only
//! ever claims what is assigned to it and free (or held by a dead process), and only releases what it
//! holds and is assigned elsewhere, once it has nothing of that shard in processing (until then it
//! stops fetching the shard: it *drains*). So two owners never overlap, a handed-over shard waits at
//! most one beat plus the jobs in flight, and a shard never stalls: if its assignee dies, the next
//! assignment has a live one. Lowkiq's static splitters ([`Splitter::Default`], [`Splitter::ByNode`])
//! fix the assignment instead; the leases still keep two misconfigured nodes from overlapping.
//!
//! Whenever a process acquires a shard (at start, on take-over, on hand-over) it first pushes the
//! shard's in-flight state back into the queue (`ordered_recover.lua`), as Lowkiq does at start: the
//! previous owner is dead or drained, so anything still in processing was abandoned.
//!
//! Planning is pure ([`plan`]) from a snapshot read in one call; the claims and releases are re-checked
//! atomically by the script that applies them, so a stale snapshot can only delay a hand-over.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use redis::Value;

use crate::error::{Error, Result};
use crate::link::blocking::SyncConn;
use crate::liveness::DEAD_AFTER;
use crate::scripts;

use super::{reply_array, reply_string, OrderedQueue};

/// How a process decides which shards it should hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Splitter {
    /// Leases spread over the live processes running the queue, rebalanced as they come and go.
    #[default]
    Balanced,
    /// Lowkiq's default splitter: this process wants every shard (a single node).
    Default,
    /// Lowkiq's `by_node` splitter: of all workers' shards laid out in one list, node `node_number`
    /// takes every `number_of_nodes`-th one. `offset` is this queue's first position in that list
    /// (the shard counts of the workers before it), which the Ruby side knows.
    ByNode {
        number_of_nodes: u32,
        node_number: u32,
        offset: u32,
    },
}

impl Splitter {
    fn validate(&self) -> Result<()> {
        match *self {
            Splitter::ByNode {
                number_of_nodes,
                node_number,
                ..
            } if number_of_nodes == 0 || node_number >= number_of_nodes => {
                Err(Error::InvalidArgument(format!(
                    "by_node splitter: node_number {node_number} is not below number_of_nodes {number_of_nodes}"
                )))
            }
            _ => Ok(()),
        }
    }
}

/// What one beat saw: live members (sorted), lease owners, in-flight counts per shard.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Snapshot {
    pub live: Vec<String>,
    pub leases: BTreeMap<u32, String>,
    pub in_flight: BTreeMap<u32, i64>,
}

/// What a beat should do.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    pub claim: Vec<u32>,
    pub release: Vec<u32>,
    /// Held, assigned elsewhere, still in processing: keep, but fetch no more from it.
    pub drain: Vec<u32>,
}

/// The member a shard is assigned to under [`Splitter::Balanced`]; `live` is sorted.
pub fn assignee(live: &[String], offset: u32, shard: u32) -> Option<&str> {
    if live.is_empty() {
        return None;
    }
    let i = (u64::from(shard) + u64::from(offset)) % live.len() as u64;
    live.get(i as usize).map(String::as_str)
}

/// Where a queue's shards start in the balanced assignment: the CRC-32 of its name, so that the
/// shards 0 of many small queues do not all fall to the first process.
pub fn queue_offset(queue: &str) -> u32 {
    crc32fast::hash(queue.as_bytes())
}

/// Whether `me` should hold `shard`.
fn wanted(splitter: Splitter, me: &str, live: &[String], offset: u32, shard: u32) -> bool {
    match splitter {
        Splitter::Balanced => assignee(live, offset, shard) == Some(me),
        Splitter::Default => true,
        Splitter::ByNode {
            number_of_nodes,
            node_number,
            offset,
        } => {
            (u64::from(offset) + u64::from(shard)) % u64::from(number_of_nodes.max(1))
                == u64::from(node_number)
        }
    }
}

/// The claims and releases `me` should make, from `snap`. Pure: every member computes the same
/// assignment from the same snapshot.
pub fn plan(me: &str, shards_count: u32, splitter: Splitter, offset: u32, snap: &Snapshot) -> Plan {
    let mut live = snap.live.clone();
    if !live.iter().any(|m| m == me) {
        live.push(me.to_owned());
    }
    live.sort();
    live.dedup();
    let mut out = Plan::default();
    for shard in 0..shards_count {
        let owner = snap.leases.get(&shard).map(String::as_str);
        let mine = owner == Some(me);
        if wanted(splitter, me, &live, offset, shard) {
            let free = match owner {
                None => true,
                Some(o) => o == me || !live.iter().any(|m| m == o),
            };
            if free {
                out.claim.push(shard);
            }
        } else if mine {
            if snap.in_flight.get(&shard).copied().unwrap_or(0) > 0 {
                out.drain.push(shard);
            } else {
                out.release.push(shard);
            }
        }
    }
    out
}

/// What a beat changed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Balance {
    /// Shards acquired by this beat (their in-flight state has been pushed back).
    pub acquired: Vec<u32>,
    pub released: Vec<u32>,
    /// Ids pushed back by recovery.
    pub recovered: u64,
}

/// One process's shards of one queue.
#[derive(Debug, Clone)]
pub struct Ownership {
    queue: OrderedQueue,
    identity: String,
    splitter: Splitter,
    dead_after: Duration,
    offset: u32,
    owned: BTreeSet<u32>,
    draining: BTreeSet<u32>,
}

impl Ownership {
    pub fn new(queue: OrderedQueue, identity: &str, splitter: Splitter) -> Result<Ownership> {
        splitter.validate()?;
        if identity.is_empty() {
            return Err(Error::InvalidArgument(
                "an ordered queue's owner needs an identity".to_owned(),
            ));
        }
        let offset = queue_offset(queue.name());
        Ok(Ownership {
            queue,
            identity: identity.to_owned(),
            splitter,
            dead_after: DEAD_AFTER,
            offset,
            owned: BTreeSet::new(),
            draining: BTreeSet::new(),
        })
    }

    /// Overrides [`DEAD_AFTER`] (tests; every process of a queue must use the same value).
    pub fn with_dead_after(mut self, dead_after: Duration) -> Ownership {
        self.dead_after = dead_after;
        self
    }

    pub fn queue(&self) -> &OrderedQueue {
        &self.queue
    }

    /// Shards this process holds.
    pub fn owned(&self) -> Vec<u32> {
        self.owned.iter().copied().collect()
    }

    /// Shards to fetch from: held and not being handed over.
    pub fn fetchable(&self) -> Vec<u32> {
        self.owned.difference(&self.draining).copied().collect()
    }

    /// The fetchable shards thread `thread` of `threads` serves, Lowkiq's default split: every
    /// `threads`-th one, so each shard is fetched by one thread of the process.
    pub fn thread_shards(&self, thread: usize, threads: usize) -> Vec<u32> {
        self.fetchable()
            .into_iter()
            .enumerate()
            .filter(|(i, _)| threads > 0 && i % threads == thread)
            .map(|(_, s)| s)
            .collect()
    }

    fn lease_call(&self, mode: &str) -> redis::ScriptInvocation<'static> {
        let keys = self.queue.keys();
        let mut inv = scripts::ORDERED_LEASE.prepare_invoke();
        inv.key(keys.leases())
            .key(keys.members())
            .key(keys.processing_length_by_shard())
            .arg(&self.identity)
            .arg(self.dead_after.as_secs_f64())
            .arg(mode);
        inv
    }

    /// One beat: renews this process's leases, plans, applies, and recovers acquired shards. Call it
    /// every [`crate::liveness::BEAT_INTERVAL`] (and once before the first fetch).
    pub fn balance(&mut self, conn: &mut SyncConn) -> Result<Balance> {
        let snap = self.look(conn)?;
        self.apply(conn, &snap)
    }

    /// The first half of a beat: renews this process's leases and reads what the plan is made from.
    pub fn look(&self, conn: &mut SyncConn) -> Result<Snapshot> {
        parse_snapshot(conn.script(&self.lease_call("look"))?)
    }

    /// The second half of a beat: plans from `snap` and applies the plan. The script re-checks every
    /// claim and release, so a snapshot gone stale meanwhile (a thread of ours fetched from a shard
    /// the plan releases) only delays a hand-over: such a shard is kept, and drains.
    pub fn apply(&mut self, conn: &mut SyncConn, snap: &Snapshot) -> Result<Balance> {
        let plan = plan(
            &self.identity,
            self.queue.shards_count(),
            self.splitter,
            self.offset,
            snap,
        );
        let mut out = Balance::default();
        let mut inv = self.lease_call("apply");
        for s in &plan.claim {
            inv.arg("claim").arg(*s);
        }
        for s in &plan.release {
            inv.arg("release").arg(*s);
        }
        let held: Vec<Value> = conn.script(&inv)?;
        let held: BTreeSet<u32> = held
            .into_iter()
            .map(|v| {
                let s = reply_string(v, "held shard")?;
                s.parse()
                    .map_err(|_| Error::redis(format!("lease script returned shard {s:?}")))
            })
            .collect::<Result<_>>()?;
        // A release the script refused (something of the shard is in processing) keeps the shard,
        // draining: fetched no more, released at a later beat.
        let kept: BTreeSet<u32> = plan
            .release
            .iter()
            .filter(|s| held.contains(*s))
            .copied()
            .collect();
        for s in &plan.release {
            if !kept.contains(s) && self.owned.remove(s) {
                out.released.push(*s);
            }
        }
        self.draining = plan.drain.iter().chain(&kept).copied().collect();
        // Held by the snapshot and draining stay owned; anything else we thought we held but the
        // snapshot names another owner for is gone (taken over while we were silent).
        self.owned
            .retain(|s| snap.leases.get(s).map(String::as_str) == Some(self.identity.as_str()));
        for s in held {
            if self.owned.contains(&s) || kept.contains(&s) {
                continue;
            }
            // Acquired: put back what a previous owner left in processing before fetching from it.
            // If this fails the shard stays out of `owned`, and the next beat claims it (ours
            // already) and recovers again.
            out.recovered += self.recover(conn, s)?;
            self.owned.insert(s);
            out.acquired.push(s);
        }
        Ok(out)
    }

    /// Pushes `shard`'s in-flight state back into its queue; this process must hold the shard.
    pub fn recover(&self, conn: &mut SyncConn, shard: u32) -> Result<u64> {
        recover_shard(conn, &self.queue, &self.identity, shard)
    }

    /// Stops: releases every lease this process holds and leaves the members, so the others take the
    /// shards at their next beat instead of after `DEAD_AFTER`. Call after the last settle.
    pub fn leave(&mut self, conn: &mut SyncConn) -> Result<()> {
        conn.script::<Value>(&self.lease_call("leave"))?;
        self.owned.clear();
        self.draining.clear();
        Ok(())
    }
}

/// Pushes `shard`'s in-flight state back into its queue (merged as a failed job merges), if
/// `identity` holds the shard's lease. Returns how many ids went back.
pub fn recover_shard(
    conn: &mut SyncConn,
    queue: &OrderedQueue,
    identity: &str,
    shard: u32,
) -> Result<u64> {
    let mut inv = super::scripts::RECOVER.prepare_invoke();
    inv.key(queue.keys().leases())
        .arg(queue.keys().prefix())
        .arg(identity)
        .arg(shard);
    let n: i64 = conn.script(&inv)?;
    if n < 0 {
        return Err(Error::redis(format!(
            "cannot recover shard {shard} of {:?}: its lease is not held by {identity}",
            queue.name()
        )));
    }
    Ok(n as u64)
}

fn parse_snapshot(reply: Value) -> Result<Snapshot> {
    let mut parts = reply_array(reply, "lease look")?.into_iter();
    let (Some(live), Some(leases), Some(in_flight)) = (parts.next(), parts.next(), parts.next())
    else {
        return Err(Error::redis("lease look returned a short reply"));
    };
    let mut snap = Snapshot::default();
    for v in reply_array(live, "members")? {
        snap.live.push(reply_string(v, "member")?);
    }
    snap.live.sort();
    let mut flat = reply_array(leases, "leases")?.into_iter();
    while let (Some(s), Some(owner)) = (flat.next(), flat.next()) {
        // A field that is not a shard number is not ours to interpret; skip it.
        if let Ok(s) = reply_string(s, "leased shard")?.parse::<u32>() {
            snap.leases.insert(s, reply_string(owner, "lease owner")?);
        }
    }
    let mut flat = reply_array(in_flight, "processing lengths")?.into_iter();
    while let (Some(s), Some(n)) = (flat.next(), flat.next()) {
        let s = reply_string(s, "shard")?.parse::<u32>();
        let n = reply_string(n, "length")?.parse::<i64>();
        if let (Ok(s), Ok(n)) = (s, n) {
            snap.in_flight.insert(s, n);
        }
    }
    Ok(snap)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snap(live: &[&str], leases: &[(u32, &str)], in_flight: &[(u32, i64)]) -> Snapshot {
        Snapshot {
            live: live.iter().map(|s| (*s).to_owned()).collect(),
            leases: leases.iter().map(|(s, o)| (*s, (*o).to_owned())).collect(),
            in_flight: in_flight.iter().copied().collect(),
        }
    }

    #[test]
    fn every_shard_has_exactly_one_assignee_and_the_split_is_even() {
        let live: Vec<String> = ["a", "b", "c"].iter().map(|s| s.to_string()).collect();
        for offset in [0, 1, 7, u32::MAX] {
            let mut counts = BTreeMap::new();
            for shard in 0..10 {
                let who = assignee(&live, offset, shard).unwrap();
                *counts.entry(who).or_insert(0) += 1;
            }
            let (min, max) = (
                counts.values().min().copied().unwrap(),
                counts.values().max().copied().unwrap(),
            );
            assert!(max - min <= 1, "offset {offset}: {counts:?}");
            assert_eq!(counts.values().sum::<i32>(), 10);
        }
        assert_eq!(assignee(&[], 0, 3), None);
    }

    #[test]
    fn alone_a_process_claims_every_free_shard() {
        let p = plan("a", 4, Splitter::Balanced, 0, &snap(&[], &[], &[]));
        assert_eq!(p.claim, vec![0, 1, 2, 3]);
        assert!(p.release.is_empty());
    }

    #[test]
    fn a_shard_held_by_a_live_process_is_not_claimed_until_released() {
        // With a and b live and offset 0, b is assigned shards 1 and 3, which a holds.
        let s = snap(
            &["a", "b"],
            &[(0, "a"), (1, "a"), (2, "a"), (3, "a")],
            &[(3, 1)],
        );
        let b = plan("b", 4, Splitter::Balanced, 0, &s);
        assert!(b.claim.is_empty(), "{b:?}");
        let a = plan("a", 4, Splitter::Balanced, 0, &s);
        assert_eq!(a.claim, vec![0, 2]);
        assert_eq!(a.release, vec![1], "shard 1 has nothing in processing");
        assert_eq!(a.drain, vec![3], "shard 3 has an id in processing");
    }

    #[test]
    fn a_dead_owners_shards_are_claimed_by_their_new_assignee() {
        // "c" holds everything but is not live.
        let s = snap(
            &["a", "b"],
            &[(0, "c"), (1, "c"), (2, "c"), (3, "c")],
            &[(0, 2)],
        );
        let a = plan("a", 4, Splitter::Balanced, 0, &s);
        let b = plan("b", 4, Splitter::Balanced, 0, &s);
        assert_eq!(a.claim, vec![0, 2]);
        assert_eq!(b.claim, vec![1, 3]);
    }

    #[test]
    fn threads_split_the_fetchable_shards_without_overlap() {
        let q = OrderedQueue::new("", "Q", 7).unwrap();
        let mut own = Ownership::new(q, "a", Splitter::Default).unwrap();
        own.owned = (0..7).collect();
        own.draining = [3].into_iter().collect();
        assert_eq!(own.fetchable(), vec![0, 1, 2, 4, 5, 6]);
        assert_eq!(own.thread_shards(0, 4), vec![0, 5]);
        assert_eq!(own.thread_shards(1, 4), vec![1, 6]);
        assert_eq!(own.thread_shards(3, 4), vec![4]);
        assert!(own.thread_shards(0, 0).is_empty());
    }

    #[test]
    fn by_node_takes_every_nth_shard_of_the_flat_list() {
        let split = Splitter::ByNode {
            number_of_nodes: 2,
            node_number: 1,
            offset: 3,
        };
        let p = plan("a", 5, split, 0, &snap(&[], &[], &[]));
        // Flat positions 3..8; odd positions 3, 5, 7 are shards 0, 2, 4.
        assert_eq!(p.claim, vec![0, 2, 4]);
        let all = plan(
            "a",
            3,
            Splitter::Default,
            0,
            &snap(&["b"], &[(1, "b")], &[]),
        );
        assert_eq!(all.claim, vec![0, 2], "a live holder keeps its lease");
        assert!(Splitter::ByNode {
            number_of_nodes: 2,
            node_number: 2,
            offset: 0
        }
        .validate()
        .is_err());
    }
}
