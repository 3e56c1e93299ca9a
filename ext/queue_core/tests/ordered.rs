//! Ordered jobs (Lowkiq's model) against a real Redis: the WIRE.md §3 layout, every merge rule, fetch
//! exclusivity and order, retries and the morgue, recovery of in-flight state, shard leases with
//! take-over and rebalancing, the morgue actions and the stats document.

mod support;

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::{Arc, Mutex};

use queue_core::link::blocking::SyncConn;
use queue_core::ordered::fetch::{Batch, OrderedFetcher, Scheduler, MAX_PREFETCH};
use queue_core::ordered::lease::{Ownership, Splitter};
use queue_core::ordered::morgue::{self, MorgueOrder};
use queue_core::ordered::push::{push, NewJob};
use queue_core::ordered::settle::{settle, Outcome, Settled};
use queue_core::ordered::{stats, OrderedQueue};

use support::*;

const P1: &str = "host:1:aaaaaaaaaaaa";
const P2: &str = "host:2:bbbbbbbbbbbb";
const P3: &str = "host:3:cccccccccccc";

struct Fx {
    t: TestRedis,
    q: OrderedQueue,
}

impl Fx {
    fn new(namespace: &str, shards: u32) -> Fx {
        let t = TestRedis::with_namespace(namespace);
        let q = OrderedQueue::new(namespace, "ATestWorker", shards).expect("queue");
        Fx { t, q }
    }

    fn sync(&self) -> SyncConn {
        SyncConn::new(&self.t.redis())
    }

    /// A process holding every shard (Lowkiq's default splitter), after its first beat.
    fn owner(&self, identity: &str) -> (SyncConn, Ownership) {
        let mut conn = self.sync();
        let mut own = Ownership::new(self.q.clone(), identity, Splitter::Default).expect("owner");
        own.balance(&mut conn).expect("balance");
        (conn, own)
    }

    fn fetcher(&self, identity: &str, batch: usize) -> OrderedFetcher {
        OrderedFetcher::new(self.q.clone(), identity, Scheduler::Lag, batch).expect("fetcher")
    }

    fn key(&self, suffix: &str) -> String {
        format!("{}{suffix}", self.q.keys().prefix())
    }

    fn now(&self) -> f64 {
        let (s, us): (u64, u64) = redis::cmd("TIME").query(&mut self.t.conn()).expect("TIME");
        s as f64 + us as f64 / 1e6
    }

    fn payloads(&self, key_suffix: &str) -> Vec<(String, f64)> {
        zrange_scores(&mut self.t.conn(), &self.key(key_suffix))
            .into_iter()
            .map(|(m, s)| (text(&m), s))
            .collect()
    }

    fn zscore(&self, key_suffix: &str, id: &str) -> Option<f64> {
        redis::cmd("ZSCORE")
            .arg(self.key(key_suffix))
            .arg(id)
            .query(&mut self.t.conn())
            .expect("ZSCORE")
    }

    fn perform_in(&self, id: &str) -> Option<f64> {
        let all = self.zscore("all_ids_scored_by_perfrom_in", id);
        let shard = self.zscore(
            &format!("ids_scored_by_perform_in:{}", self.q.shard_of(id)),
            id,
        );
        assert_eq!(all, shard, "the two perform_in indexes of {id} agree");
        all
    }

    fn retry_count(&self, id: &str) -> Option<f64> {
        self.zscore("all_ids_scored_by_retry_count", id)
    }

    /// A field of the queue's hash `key_suffix` (`errors`, `morgue:errors`, ...).
    fn field(&self, key_suffix: &str, field: &str) -> Option<String> {
        hget(&mut self.t.conn(), &self.key(key_suffix), field)
    }

    /// One of the queue's counters (`processed`, `failed`).
    fn count(&self, name: &str) -> i64 {
        counter(&mut self.t.conn(), &self.key(name))
    }

    fn has(&self, key_suffix: &str) -> bool {
        exists(&mut self.t.conn(), &self.key(key_suffix))
    }
}

fn job(id: &str, payload: &str, score: f64, perform_in: f64) -> NewJob {
    NewJob {
        id: id.to_owned(),
        payload: payload.as_bytes().to_vec(),
        score,
        perform_in,
    }
}

fn texts(payloads: &[(Vec<u8>, f64)]) -> Vec<(String, f64)> {
    payloads.iter().map(|(p, s)| (text(p), *s)).collect()
}

fn take(f: &mut OrderedFetcher, conn: &mut SyncConn, own: &Ownership) -> Batch {
    f.fetch(conn, &own.fetchable())
        .expect("fetch")
        .expect("a due id")
}

fn fail(error: &str, retry_in: f64) -> Outcome {
    Outcome::Failed {
        error: error.to_owned(),
        retry_in,
    }
}

fn settle_one(
    conn: &mut SyncConn,
    q: &OrderedQueue,
    who: &str,
    batch: &Batch,
    outcome: Outcome,
    max: u32,
) -> Settled {
    let outcomes: Vec<_> = batch
        .jobs
        .iter()
        .map(|j| (j.id.clone(), outcome.clone()))
        .collect();
    settle(conn, q, who, batch.shard, &outcomes, max).expect("settle")
}

// ---- layout --------------------------------------------------------------------------------------

#[test]
fn keys_are_wire_md_section_3_exactly() {
    let fx = Fx::new("ns:", 24);
    let mut c = fx.t.conn();
    let mut conn = fx.sync();
    // CRC-32("order-42") = 1475806942, which is 22 mod 24 (zlib.crc32 gives the same).
    assert_eq!(fx.q.shard_of("order-42"), 22);
    push(&mut conn, &fx.q, &[job("order-42", "v1", 1.0, 100.0)]).expect("push");
    let p = "ns:lowkiq:A:v1:ATestWorker:";
    assert_eq!(
        all_keys(&mut c),
        vec![
            format!("{p}all_ids_lex"),
            format!("{p}all_ids_scored_by_perfrom_in"),
            format!("{p}all_ids_scored_by_retry_count"),
            format!("{p}ids_scored_by_perform_in:22"),
            format!("{p}payloads:order-42"),
        ]
    );
    assert_eq!(fx.zscore("all_ids_lex", "order-42"), Some(0.0));
    assert_eq!(fx.perform_in("order-42"), Some(100.0));
    assert_eq!(fx.retry_count("order-42"), Some(-1.0));
    assert_eq!(fx.payloads("payloads:order-42"), vec![("v1".into(), 1.0)]);

    let (mut conn, own) = fx.owner(P1);
    let batch = take(&mut fx.fetcher(P1, 1), &mut conn, &own);
    assert_eq!(batch.shard, 22);
    let keys = all_keys(&mut c);
    for k in [
        format!("{p}processing:ids_with_perform_in:22"),
        format!("{p}processing:ids_with_retry_count:22"),
        format!("{p}processing:payloads:order-42"),
        format!("{p}processing_length_by_shard"),
        "ns:jq:ordered:ATestWorker:leases".to_owned(),
        "ns:jq:ordered:ATestWorker:members".to_owned(),
    ] {
        assert!(keys.contains(&k), "{k} missing from {keys:?}");
    }
    assert!(!keys.contains(&format!("{p}payloads:order-42")));
    assert!(!keys.contains(&format!("{p}all_ids_lex")), "{keys:?}");
    assert_eq!(
        hget(
            &mut c,
            &format!("{p}processing:ids_with_perform_in:22"),
            "order-42"
        )
        .as_deref(),
        Some("100")
    );
    assert_eq!(
        hget(&mut c, &format!("{p}processing_length_by_shard"), "22").as_deref(),
        Some("1")
    );

    let s = settle_one(&mut conn, &fx.q, P1, &batch, fail("boom", 0.0), 0);
    assert_eq!(s.morgue, vec!["order-42".to_owned()]);
    let keys = all_keys(&mut c);
    for k in [
        format!("{p}morgue:all_ids_lex"),
        format!("{p}morgue:all_ids_scored_by_updated_at"),
        format!("{p}morgue:payloads:order-42"),
        format!("{p}morgue:errors"),
        format!("{p}failed"),
    ] {
        assert!(keys.contains(&k), "{k} missing from {keys:?}");
    }
    assert!(
        !keys
            .iter()
            .any(|k| k.starts_with(&format!("{p}processing:"))),
        "{keys:?}"
    );
}

// ---- merge rules ---------------------------------------------------------------------------------

#[test]
fn payloads_union_and_identical_bytes_keep_the_lowest_score() {
    let fx = Fx::new("", 5);
    let mut conn = fx.sync();
    push(
        &mut conn,
        &fx.q,
        &[job("1", "v1", 1.0, 10.0), job("1", "v2", 2.0, 10.0)],
    )
    .expect("push");
    push(
        &mut conn,
        &fx.q,
        &[
            job("1", "v2", 3.0, 10.0),
            job("1", "v3", 4.0, 10.0),
            job("1", "v1", 0.5, 10.0),
        ],
    )
    .expect("push");
    assert_eq!(
        fx.payloads("payloads:1"),
        vec![("v1".into(), 0.5), ("v2".into(), 2.0), ("v3".into(), 4.0)]
    );
}

#[test]
fn an_id_twice_in_one_bulk_is_queued_once_with_its_first_jobs_perform_in() {
    let fx = Fx::new("", 5);
    let mut conn = fx.sync();
    let queued = push(
        &mut conn,
        &fx.q,
        &[
            job("7", "a", 1.0, 50.0),
            job("8", "b", 1.0, 60.0),
            job("7", "c", 2.0, 40.0),
        ],
    )
    .expect("push");
    assert_eq!(queued, 2);
    assert_eq!(fx.perform_in("7"), Some(50.0));
    assert_eq!(fx.perform_in("8"), Some(60.0));
    assert_eq!(fx.retry_count("7"), Some(-1.0));
    assert_eq!(
        fx.payloads("payloads:7"),
        vec![("a".into(), 1.0), ("c".into(), 2.0)]
    );
    // Again, both already queued: nothing newly queued, perform_in kept.
    let queued = push(
        &mut conn,
        &fx.q,
        &[job("7", "d", 3.0, 1.0), job("8", "e", 3.0, 1.0)],
    )
    .expect("push");
    assert_eq!(queued, 0);
    assert_eq!(fx.perform_in("7"), Some(50.0));
}

#[test]
fn new_plus_queued_keeps_the_queued_perform_in_and_retry_count() {
    let fx = Fx::new("", 5);
    let (mut conn, own) = fx.owner(P1);
    push(&mut conn, &fx.q, &[job("1", "v1", 1.0, 10.0)]).expect("push");
    let batch = take(&mut fx.fetcher(P1, 1), &mut conn, &own);
    settle_one(&mut conn, &fx.q, P1, &batch, fail("e", 1000.0), 25);
    let queued_at = fx.perform_in("1").expect("queued again");
    assert_eq!(fx.retry_count("1"), Some(0.0));

    push(&mut conn, &fx.q, &[job("1", "v2", 2.0, 20.0)]).expect("push");
    assert_eq!(fx.perform_in("1"), Some(queued_at));
    assert_eq!(fx.retry_count("1"), Some(0.0));
    assert_eq!(
        fx.payloads("payloads:1"),
        vec![("v1".into(), 1.0), ("v2".into(), 2.0)]
    );
    // Still due in 1000 s: nothing to fetch.
    assert_eq!(
        fx.fetcher(P1, 1)
            .fetch(&mut conn, &own.fetchable())
            .expect("fetch"),
        None
    );
}

#[test]
fn payloads_pushed_while_an_id_runs_wait_for_it_and_never_run_beside_it() {
    let fx = Fx::new("", 5);
    let (mut conn, own) = fx.owner(P1);
    let mut f = fx.fetcher(P1, 5);
    push(&mut conn, &fx.q, &[job("1", "v1", 1.0, 10.0)]).expect("push");
    let first = take(&mut f, &mut conn, &own);
    assert_eq!(texts(&first.jobs[0].payloads), vec![("v1".into(), 1.0)]);

    push(&mut conn, &fx.q, &[job("1", "v2", 2.0, 10.0)]).expect("push");
    assert_eq!(
        fx.perform_in("1"),
        Some(10.0),
        "queued behind the running one"
    );
    assert_eq!(
        f.fetch(&mut conn, &own.fetchable()).expect("fetch"),
        None,
        "the id is running: its new payload must wait"
    );

    settle_one(&mut conn, &fx.q, P1, &first, Outcome::Done, 25);
    let second = take(&mut f, &mut conn, &own);
    assert_eq!(second.jobs.len(), 1);
    assert_eq!(second.jobs[0].retry_count, -1);
    assert_eq!(texts(&second.jobs[0].payloads), vec![("v2".into(), 2.0)]);
    assert_eq!(fx.count("processed"), 1);
}

#[test]
fn failed_plus_queued_takes_the_failed_jobs_perform_in_and_retry_count() {
    let fx = Fx::new("", 5);
    let (mut conn, own) = fx.owner(P1);
    push(&mut conn, &fx.q, &[job("1", "v1", 5.0, 10.0)]).expect("push");
    let batch = take(&mut fx.fetcher(P1, 1), &mut conn, &own);
    // Pushed meanwhile: a new payload, and v1 again with a lower score, due earlier.
    push(
        &mut conn,
        &fx.q,
        &[job("1", "v2", 6.0, 1.0), job("1", "v1", 4.0, 1.0)],
    )
    .expect("push");
    let before = fx.now();
    let s = settle_one(&mut conn, &fx.q, P1, &batch, fail("boom", 500.0), 25);
    assert_eq!((s.processed, s.failed, s.lost), (0, 1, false));
    let at = fx.perform_in("1").expect("queued");
    assert!(
        at >= before + 500.0 && at < fx.now() + 500.0,
        "perform_in {at} is now + retry_in"
    );
    assert_eq!(fx.retry_count("1"), Some(0.0));
    assert_eq!(
        fx.payloads("payloads:1"),
        vec![("v1".into(), 4.0), ("v2".into(), 6.0)]
    );
    assert_eq!(fx.field("errors", "1").as_deref(), Some("boom"));
    assert_eq!(fx.count("failed"), 1);
    assert_eq!(
        fx.field(
            "processing_length_by_shard",
            &fx.q.shard_of("1").to_string()
        )
        .as_deref(),
        Some("0")
    );
}

#[test]
fn put_back_returns_an_unrun_id_as_fetched_merged_with_what_was_pushed_meanwhile() {
    let fx = Fx::new("", 5);
    let (mut conn, own) = fx.owner(P1);
    push(&mut conn, &fx.q, &[job("1", "v1", 5.0, 10.0)]).expect("push");
    let batch = take(&mut fx.fetcher(P1, 1), &mut conn, &own);
    let s = settle_one(&mut conn, &fx.q, P1, &batch, fail("boom", 0.0), 25);
    assert_eq!(s.failed, 1);
    // Fetched again after its first failure (retry_count 0, the error kept), then put back unrun,
    // with a payload pushed meanwhile.
    let batch = take(&mut fx.fetcher(P1, 1), &mut conn, &own);
    let at = batch.jobs[0].perform_in;
    push(&mut conn, &fx.q, &[job("1", "v2", 6.0, 1.0)]).expect("push");
    let s = settle_one(&mut conn, &fx.q, P1, &batch, Outcome::PutBack, 25);
    assert_eq!((s.processed, s.failed, s.lost), (0, 0, false));
    assert_eq!(
        fx.perform_in("1"),
        Some(at),
        "its own perform_in, not the push's"
    );
    assert_eq!(fx.retry_count("1"), Some(0.0));
    assert_eq!(
        fx.payloads("payloads:1"),
        vec![("v1".into(), 5.0), ("v2".into(), 6.0)]
    );
    assert_eq!(fx.field("errors", "1").as_deref(), Some("boom"));
    assert_eq!(fx.count("failed"), 1);
    assert_eq!(fx.count("processed"), 0);
    assert!(!fx.has("processing:payloads:1"));
    assert_eq!(
        fx.field(
            "processing_length_by_shard",
            &fx.q.shard_of("1").to_string()
        )
        .as_deref(),
        Some("0")
    );
}

// ---- retries and the morgue ----------------------------------------------------------------------

#[test]
fn exhausted_retries_send_the_oldest_payload_to_the_morgue_and_the_rest_start_afresh() {
    let fx = Fx::new("", 5);
    let (mut conn, own) = fx.owner(P1);
    let mut f = fx.fetcher(P1, 1);
    push(
        &mut conn,
        &fx.q,
        &[job("1", "v1", 1.0, 0.0), job("1", "v2", 2.0, 0.0)],
    )
    .expect("push");
    // max_retry_count 2: the failures leave retry_count 0, 1, then 2 sends v1 to the morgue.
    for expected_retry in [-1, 0, 1] {
        let b = take(&mut f, &mut conn, &own);
        assert_eq!(b.jobs[0].retry_count, expected_retry);
        assert_eq!(b.jobs[0].payloads.len(), 2);
        let s = settle_one(
            &mut conn,
            &fx.q,
            P1,
            &b,
            fail(&format!("e{expected_retry}"), 0.0),
            2,
        );
        assert_eq!(s.morgue.is_empty(), expected_retry < 1);
    }
    assert_eq!(fx.payloads("morgue:payloads:1"), vec![("v1".into(), 1.0)]);
    assert_eq!(fx.field("morgue:errors", "1").as_deref(), Some("e1"));
    assert!(fx.zscore("morgue:all_ids_lex", "1").is_some());
    assert!(fx
        .zscore("morgue:all_ids_scored_by_updated_at", "1")
        .is_some());
    // The rest: back, due now, retry_count -1 (the document's rule).
    assert_eq!(fx.payloads("payloads:1"), vec![("v2".into(), 2.0)]);
    assert_eq!(fx.retry_count("1"), Some(-1.0));
    assert!(fx.perform_in("1").expect("queued") <= fx.now());
    let b = take(&mut f, &mut conn, &own);
    assert_eq!(texts(&b.jobs[0].payloads), vec![("v2".into(), 2.0)]);
    assert_eq!(b.jobs[0].retry_count, -1);
    // The last payload exhausts too: nothing goes back, the morgue holds both.
    let s = settle_one(&mut conn, &fx.q, P1, &b, fail("last", 0.0), 0);
    assert_eq!(s.morgue, vec!["1".to_owned()]);
    assert_eq!(fx.perform_in("1"), None);
    assert!(!fx.has("payloads:1"));
    assert_eq!(
        fx.payloads("morgue:payloads:1"),
        vec![("v1".into(), 1.0), ("v2".into(), 2.0)]
    );
}

#[test]
fn a_push_for_an_id_in_the_morgue_queues_it_afresh_and_leaves_the_morgue_alone() {
    let fx = Fx::new("", 1);
    let (mut conn, own) = fx.owner(P1);
    kill(&fx, &mut conn, &own, &["1"]);
    push(&mut conn, &fx.q, &[job("1", "v2", 2.0, 3.0)]).expect("push");
    assert_eq!(fx.perform_in("1"), Some(3.0));
    assert_eq!(fx.retry_count("1"), Some(-1.0));
    assert_eq!(fx.payloads("payloads:1"), vec![("v2".into(), 2.0)]);
    assert_eq!(fx.payloads("morgue:payloads:1"), vec![("p1".into(), 1.0)]);
}

// ---- fetch ---------------------------------------------------------------------------------------

#[test]
fn fetch_takes_the_oldest_due_ids_with_payloads_sorted_by_score() {
    let fx = Fx::new("", 1);
    let (mut conn, own) = fx.owner(P1);
    let later = fx.now() + 3600.0;
    push(
        &mut conn,
        &fx.q,
        &[
            job("c", "c2", 9.0, 30.0),
            job("a", "a1", 1.0, 10.0),
            job("c", "c1", 3.0, 30.0),
            job("b", "b1", 1.0, 20.0),
            job("z", "z1", 1.0, later),
        ],
    )
    .expect("push");
    let mut f = fx.fetcher(P1, 2);
    let b = take(&mut f, &mut conn, &own);
    let ids: Vec<_> = b.jobs.iter().map(|j| j.id.as_str()).collect();
    assert_eq!(ids, vec!["a", "b"]);
    let b = take(&mut f, &mut conn, &own);
    assert_eq!(b.jobs.len(), 1, "z is not due");
    assert_eq!(b.jobs[0].id, "c");
    assert_eq!(b.jobs[0].perform_in, 30.0);
    assert_eq!(
        texts(&b.jobs[0].payloads),
        vec![("c1".into(), 3.0), ("c2".into(), 9.0)]
    );
    assert_eq!(f.fetch(&mut conn, &own.fetchable()).expect("fetch"), None);
}

#[test]
fn settle_and_fetch_does_both_in_one_call() {
    let fx = Fx::new("", 3);
    let (mut conn, own) = fx.owner(P1);
    push(
        &mut conn,
        &fx.q,
        &[
            job("a", "a1", 1.0, 1.0),
            job("b", "b1", 1.0, 2.0),
            job("c", "c1", 1.0, 3.0),
        ],
    )
    .expect("push");
    let mut f = fx.fetcher(P1, 1);
    let shards = own.fetchable();
    let (s, mut batch) = f
        .settle_and_fetch(&mut conn, None, 25, &shards)
        .expect("fetch");
    assert_eq!(s, Settled::default());
    let mut order = Vec::new();
    let mut outcome = fail("first attempt", 3600.0);
    while let Some(b) = batch {
        order.push(b.jobs[0].id.clone());
        let outcomes = vec![(b.jobs[0].id.clone(), outcome.clone())];
        let (s, next) = f
            .settle_and_fetch(&mut conn, Some((b.shard, &outcomes)), 25, &shards)
            .expect("settle and fetch");
        assert!(!s.lost);
        assert_eq!(s.processed + s.failed, 1);
        outcome = Outcome::Done;
        batch = next;
    }
    assert_eq!(order, vec!["a", "b", "c"]);
    assert_eq!(fx.count("processed"), 2);
    assert_eq!(fx.count("failed"), 1);
    assert_eq!(fx.retry_count("a"), Some(0.0), "a failed and waits an hour");
    assert_eq!(fx.perform_in("b"), None);
}

/// Settles every id of `batch` as done and fetches the next, as a processor thread does.
fn settle_all_and_fetch(
    f: &mut OrderedFetcher,
    conn: &mut SyncConn,
    own: &Ownership,
    batch: &Batch,
) -> Option<Batch> {
    let outcomes: Vec<_> = batch
        .jobs
        .iter()
        .map(|j| (j.id.clone(), Outcome::Done))
        .collect();
    let (s, next) = f
        .settle_and_fetch(conn, Some((batch.shard, &outcomes)), 25, &own.fetchable())
        .expect("settle and fetch");
    assert_eq!(s.processed, batch.jobs.len() as u64);
    next
}

#[test]
fn a_prefetching_fetcher_takes_many_batches_of_fast_ids_and_one_of_slow_ones() {
    let fx = Fx::new("", 1);
    let (mut conn, own) = fx.owner(P1);
    let jobs: Vec<_> = (0..60)
        .map(|i| job(&format!("id{i:02}"), "p", 1.0, 1.0))
        .collect();
    push(&mut conn, &fx.q, &jobs).expect("push");

    let mut fast = fx.fetcher(P1, 2).with_prefetch();
    let first = take(&mut fast, &mut conn, &own);
    assert_eq!(first.jobs.len(), 2, "untimed: one batch");
    // Settled at once: its batch took microseconds, so the next fetch takes all it may.
    let many = settle_all_and_fetch(&mut fast, &mut conn, &own, &first).expect("more ids");
    assert_eq!(many.jobs.len(), MAX_PREFETCH);
    let ids: BTreeSet<_> = many.jobs.iter().map(|j| j.id.as_str()).collect();
    assert_eq!(ids.len(), MAX_PREFETCH, "distinct ids");
    assert_eq!(
        settle_all_and_fetch(&mut fast, &mut conn, &own, &many).map(|b| b.jobs.len()),
        Some(MAX_PREFETCH)
    );

    // A worker whose batch of two took 5 ms (more than the 2 ms a fetch should hold) gets one batch
    // at a time.
    let mut slow = fx.fetcher(P1, 2).with_prefetch();
    let b = take(&mut slow, &mut conn, &own);
    std::thread::sleep(std::time::Duration::from_millis(5)); // the batch's perform
    let next = settle_all_and_fetch(&mut slow, &mut conn, &own, &b).expect("next");
    assert_eq!(next.jobs.len(), 2);
    // Without prefetch a fetcher takes one batch however fast its batches run.
    let mut plain = fx.fetcher(P1, 2);
    let b = take(&mut plain, &mut conn, &own);
    assert_eq!(
        settle_all_and_fetch(&mut plain, &mut conn, &own, &b).map(|b| b.jobs.len()),
        Some(2)
    );
}

#[test]
fn a_repeated_settle_counts_and_deletes_only_what_is_still_in_processing() {
    let fx = Fx::new("", 1);
    let (mut conn, own) = fx.owner(P1);
    let jobs: Vec<_> = ["a", "b", "c"]
        .iter()
        .map(|id| job(id, "p", 1.0, 1.0))
        .collect();
    push(&mut conn, &fx.q, &jobs).expect("push");
    let mut f = fx.fetcher(P1, 3);
    let b = take(&mut f, &mut conn, &own);
    assert_eq!(b.jobs.len(), 3);
    let done = |ids: &[&str]| -> Vec<(String, Outcome)> {
        ids.iter()
            .map(|id| (id.to_string(), Outcome::Done))
            .collect()
    };
    let s = settle(&mut conn, &fx.q, P1, b.shard, &done(&["a", "b"]), 25).expect("settle");
    assert_eq!(s.processed, 2);
    // The same settle again (its reply was lost), now with c: only c is still in processing.
    let s = settle(&mut conn, &fx.q, P1, b.shard, &done(&["a", "b", "c"]), 25).expect("settle");
    assert_eq!(s.processed, 1);
    assert_eq!(fx.count("processed"), 3);
    assert!(!fx.has("processing:payloads:c"));
    assert_eq!(
        fx.field("processing_length_by_shard", "0").as_deref(),
        Some("0")
    );
    let s = settle(&mut conn, &fx.q, P1, b.shard, &done(&["c"]), 25).expect("settle");
    assert_eq!(s.processed, 0);
    assert_eq!(fx.count("processed"), 3);
}

#[test]
fn lag_picks_the_most_late_shard_and_seq_goes_round() {
    let fx = Fx::new("", 5);
    let (mut conn, own) = fx.owner(P1);
    // "1" is in shard 3, "a" in shard 2 (CRC-32 mod 5, checked against zlib).
    assert_eq!((fx.q.shard_of("1"), fx.q.shard_of("a")), (3, 2));
    push(
        &mut conn,
        &fx.q,
        &[job("a", "x", 1.0, 50.0), job("1", "x", 1.0, 40.0)],
    )
    .expect("push");
    let b = take(&mut fx.fetcher(P1, 5), &mut conn, &own);
    assert_eq!((b.shard, b.jobs[0].id.as_str()), (3, "1"));
    settle_one(&mut conn, &fx.q, P1, &b, fail("again", 0.0), 25);

    // Seq: shard 2 then shard 3, whatever their lag.
    let mut seq = OrderedFetcher::new(fx.q.clone(), P1, Scheduler::Seq, 5).expect("fetcher");
    let first = seq.fetch(&mut conn, &[3, 2]).expect("fetch").expect("due");
    assert_eq!(first.shard, 2);
    let second = seq.fetch(&mut conn, &[3, 2]).expect("fetch").expect("due");
    assert_eq!(second.shard, 3);
}

#[test]
fn a_late_shard_whose_due_ids_are_all_running_does_not_hold_up_the_others() {
    let fx = Fx::new("", 5);
    let (mut conn, own) = fx.owner(P1);
    // "1" is in shard 3, "a" in shard 2. "1" runs, is pushed again (due at 40), and stays the oldest
    // due id of any shard; "a" (due at 50) must still be taken, by lag and by seq alike.
    push(&mut conn, &fx.q, &[job("1", "v1", 1.0, 40.0)]).expect("push");
    let running = take(&mut fx.fetcher(P1, 5), &mut conn, &own);
    assert_eq!(running.jobs[0].id, "1");
    push(
        &mut conn,
        &fx.q,
        &[job("1", "v2", 2.0, 40.0), job("a", "x", 1.0, 50.0)],
    )
    .expect("push");
    for scheduler in [Scheduler::Lag, Scheduler::Seq] {
        let mut f = OrderedFetcher::new(fx.q.clone(), P1, scheduler, 5).expect("fetcher");
        let b = f
            .fetch(&mut conn, &[3, 2])
            .expect("fetch")
            .expect("a due id");
        assert_eq!((b.shard, b.jobs[0].id.as_str()), (2, "a"), "{scheduler:?}");
        settle_one(&mut conn, &fx.q, P1, &b, fail("again", 0.0), 25);
    }
    settle_one(&mut conn, &fx.q, P1, &running, Outcome::Done, 25);
    let next = take(&mut fx.fetcher(P1, 5), &mut conn, &own);
    assert_eq!(next.jobs[0].id, "1");
    assert_eq!(texts(&next.jobs[0].payloads), vec![("v2".into(), 2.0)]);
}

#[test]
fn two_fetchers_never_hold_the_same_id_and_every_payload_runs_once() {
    let fx = Fx::new("", 3);
    let (_, own) = fx.owner(P1);
    let shards = own.fetchable();
    let running: Arc<Mutex<HashSet<String>>> = Arc::default();
    let seen: Arc<Mutex<Vec<String>>> = Arc::default();
    const IDS: usize = 12;
    const ROUNDS: usize = 30;
    let redis = fx.t.redis();
    let q = fx.q.clone();
    let pushed = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|scope| {
        let pushed = &pushed;
        let pusher = scope.spawn(|| {
            let mut conn = SyncConn::new(&redis);
            for round in 0..ROUNDS {
                let jobs: Vec<_> = (0..IDS)
                    .map(|i| job(&i.to_string(), &format!("{i}:{round}"), round as f64, 0.0))
                    .collect();
                push(&mut conn, &q, &jobs).expect("push");
            }
            pushed.store(true, std::sync::atomic::Ordering::SeqCst);
        });
        let workers: Vec<_> = (0..2)
            .map(|_| {
                let (redis, q, shards, running, seen) = (
                    redis.clone(),
                    q.clone(),
                    shards.clone(),
                    running.clone(),
                    seen.clone(),
                );
                scope.spawn(move || {
                    let mut conn = SyncConn::new(&redis);
                    let mut f = OrderedFetcher::new(q.clone(), P1, Scheduler::Lag, 2)
                        .unwrap()
                        .with_prefetch();
                    loop {
                        match f.fetch(&mut conn, &shards).expect("fetch") {
                            Some(b) => {
                                for j in &b.jobs {
                                    assert!(
                                        running.lock().unwrap().insert(j.id.clone()),
                                        "{} fetched while it was running elsewhere",
                                        j.id
                                    );
                                    let mut last = f64::MIN;
                                    for (p, s) in &j.payloads {
                                        assert!(*s >= last, "payloads sorted by score");
                                        last = *s;
                                        seen.lock().unwrap().push(text(p));
                                    }
                                }
                                for j in &b.jobs {
                                    running.lock().unwrap().remove(&j.id);
                                }
                                let outcomes: Vec<_> = b
                                    .jobs
                                    .iter()
                                    .map(|j| (j.id.clone(), Outcome::Done))
                                    .collect();
                                let s = settle(&mut conn, &q, P1, b.shard, &outcomes, 25)
                                    .expect("settle");
                                assert!(!s.lost);
                            }
                            None if pushed.load(std::sync::atomic::Ordering::SeqCst) => {
                                let left: u64 = redis::cmd("ZCARD")
                                    .arg(q.keys().all_ids_lex())
                                    .query(
                                        &mut redis::Client::open(redis.config().url.as_str())
                                            .unwrap()
                                            .get_connection()
                                            .unwrap(),
                                    )
                                    .unwrap();
                                if left == 0 {
                                    return;
                                }
                            }
                            None => std::thread::yield_now(),
                        }
                    }
                })
            })
            .collect();
        pusher.join().expect("pusher");
        for w in workers {
            w.join().expect("worker");
        }
    });
    let mut seen = seen.lock().unwrap().clone();
    seen.sort();
    let mut expected: Vec<String> = (0..IDS)
        .flat_map(|i| (0..ROUNDS).map(move |r| format!("{i}:{r}")))
        .collect();
    expected.sort();
    assert_eq!(seen, expected, "every payload ran exactly once");
}

#[test]
fn two_processes_sharing_shards_never_overlap_and_lose_nothing() {
    let fx = Fx::new("", 6);
    // Before the first push, P1 takes every shard, then releases P2's half, which P2 claims, so both
    // have work; they keep beating while they work.
    let mut setup: Vec<(SyncConn, Ownership)> = [P1, P2]
        .into_iter()
        .map(|who| {
            let own = Ownership::new(fx.q.clone(), who, Splitter::Balanced).expect("owner");
            (fx.sync(), own)
        })
        .collect();
    for i in [0, 1, 0, 1] {
        let (conn, own) = &mut setup[i];
        own.balance(conn).expect("balance");
    }
    assert_eq!(setup[1].1.owned().len(), 3);
    let processed: Arc<Mutex<BTreeMap<&str, usize>>> = Arc::default();
    let running: Arc<Mutex<HashSet<String>>> = Arc::default();
    let seen: Arc<Mutex<Vec<String>>> = Arc::default();
    const IDS: usize = 20;
    const ROUNDS: usize = 20;
    let redis = fx.t.redis();
    let q = fx.q.clone();
    let pushed = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|scope| {
        let pushed = &pushed;
        let pusher = scope.spawn(|| {
            let mut conn = SyncConn::new(&redis);
            for round in 0..ROUNDS {
                let jobs: Vec<_> = (0..IDS)
                    .map(|i| job(&i.to_string(), &format!("{i}:{round}"), round as f64, 0.0))
                    .collect();
                push(&mut conn, &q, &jobs).expect("push");
            }
            pushed.store(true, std::sync::atomic::Ordering::SeqCst);
        });
        let workers: Vec<_> = setup
            .into_iter()
            .zip([P1, P2])
            .map(|((mut conn, mut own), who)| {
                let (redis, q, running, seen, processed) = (
                    redis.clone(),
                    q.clone(),
                    running.clone(),
                    seen.clone(),
                    processed.clone(),
                );
                scope.spawn(move || {
                    let mut f = OrderedFetcher::new(q.clone(), who, Scheduler::Lag, 3)
                        .unwrap()
                        .with_prefetch();
                    let mut turn = 1u64;
                    loop {
                        // A beat every few fetches: leases move while work is in progress.
                        if turn % 4 == 0 {
                            own.balance(&mut conn).expect("balance");
                        }
                        turn += 1;
                        match f.fetch(&mut conn, &own.fetchable()).expect("fetch") {
                            Some(b) => {
                                for j in &b.jobs {
                                    assert!(
                                        running.lock().unwrap().insert(j.id.clone()),
                                        "{} fetched by {who} while it ran elsewhere",
                                        j.id
                                    );
                                    for (p, _) in &j.payloads {
                                        seen.lock().unwrap().push(text(p));
                                    }
                                }
                                for j in &b.jobs {
                                    running.lock().unwrap().remove(&j.id);
                                }
                                let outcomes: Vec<_> = b
                                    .jobs
                                    .iter()
                                    .map(|j| (j.id.clone(), Outcome::Done))
                                    .collect();
                                let s = settle(&mut conn, &q, who, b.shard, &outcomes, 25)
                                    .expect("settle");
                                assert!(!s.lost, "{who} lost shard {} while alive", b.shard);
                                *processed.lock().unwrap().entry(who).or_default() += b.jobs.len();
                            }
                            None if pushed.load(std::sync::atomic::Ordering::SeqCst) => {
                                let mut c = redis::Client::open(redis.config().url.as_str())
                                    .and_then(|c| c.get_connection())
                                    .expect("connect");
                                let left: u64 = redis::cmd("ZCARD")
                                    .arg(q.keys().all_ids_lex())
                                    .query(&mut c)
                                    .expect("ZCARD");
                                if left == 0 {
                                    return own;
                                }
                            }
                            None => std::thread::yield_now(),
                        }
                    }
                })
            })
            .collect();
        pusher.join().expect("pusher");
        let owns: Vec<Ownership> = workers
            .into_iter()
            .map(|w| w.join().expect("worker"))
            .collect();
        let mut all: Vec<u32> = owns.iter().flat_map(|o| o.owned()).collect();
        all.sort();
        let before = all.len();
        all.dedup();
        assert_eq!(before, all.len(), "no shard owned twice: {all:?}");
        assert_eq!(owns[0].owned().len(), 3);
        assert_eq!(owns[1].owned().len(), 3);
    });
    let processed = processed.lock().unwrap().clone();
    assert!(
        processed.contains_key(P1) && processed.contains_key(P2),
        "both processes worked: {processed:?}"
    );
    let mut seen = seen.lock().unwrap().clone();
    seen.sort();
    let mut expected: Vec<String> = (0..IDS)
        .flat_map(|i| (0..ROUNDS).map(move |r| format!("{i}:{r}")))
        .collect();
    expected.sort();
    assert_eq!(seen, expected, "every payload ran exactly once");
}

#[test]
fn a_process_without_the_lease_fetches_nothing_and_a_stale_settle_writes_nothing() {
    let fx = Fx::new("", 1);
    let (mut conn, own) = fx.owner(P1);
    push(&mut conn, &fx.q, &[job("1", "v1", 1.0, 0.0)]).expect("push");
    assert_eq!(
        fx.fetcher(P2, 1).fetch(&mut conn, &[0]).expect("fetch"),
        None,
        "P2 does not hold shard 0"
    );
    let b = take(&mut fx.fetcher(P1, 1), &mut conn, &own);
    // The lease moves (P1 was taken for dead); P1's late settle must not touch P2's state.
    redis::cmd("HSET")
        .arg(fx.q.keys().leases())
        .arg(0)
        .arg(P2)
        .query::<i64>(&mut fx.t.conn())
        .expect("HSET");
    let s = settle_one(&mut conn, &fx.q, P1, &b, Outcome::Done, 25);
    assert!(s.lost);
    assert!(fx.has("processing:payloads:1"));
    assert_eq!(fx.count("processed"), 0);
}

// ---- recovery and leases -------------------------------------------------------------------------

/// Makes `identity` look silent for longer than DEAD_AFTER, as a process that died does.
fn silence(fx: &Fx, identity: &str) {
    let long_ago = fx.now() - 3600.0;
    redis::cmd("ZADD")
        .arg(fx.q.keys().members())
        .arg(long_ago)
        .arg(identity)
        .query::<i64>(&mut fx.t.conn())
        .expect("ZADD");
}

#[test]
fn a_restarted_process_pushes_its_in_flight_state_back_before_fetching() {
    let fx = Fx::new("", 5);
    let (mut conn, own) = fx.owner(P1);
    push(&mut conn, &fx.q, &[job("1", "v1", 1.0, 7.0)]).expect("push");
    let b = take(&mut fx.fetcher(P1, 1), &mut conn, &own);
    settle_one(&mut conn, &fx.q, P1, &b, fail("e", 0.0), 25);
    let retried_at = fx.perform_in("1").expect("queued");
    let b = take(&mut fx.fetcher(P1, 1), &mut conn, &own);
    assert_eq!(b.jobs[0].retry_count, 0);
    push(&mut conn, &fx.q, &[job("1", "v2", 2.0, 1.0)]).expect("push");
    drop(own); // killed mid-job

    let (_, again) = fx.owner(P1);
    assert_eq!(again.owned(), vec![0, 1, 2, 3, 4]);
    assert!(!fx.has("processing:payloads:1"));
    assert_eq!(
        hgetall(
            &mut fx.t.conn(),
            &fx.key(&format!("processing:ids_with_perform_in:{}", b.shard))
        ),
        vec![]
    );
    // In-flight merges back as a failed job does: its perform_in, retry_count and error win.
    assert_eq!(fx.perform_in("1"), Some(retried_at));
    assert_eq!(fx.retry_count("1"), Some(0.0));
    assert_eq!(fx.field("errors", "1").as_deref(), Some("e"));
    assert_eq!(
        fx.payloads("payloads:1"),
        vec![("v1".into(), 1.0), ("v2".into(), 2.0)]
    );
}

#[test]
fn a_silent_owners_shards_are_taken_over_and_its_in_flight_ids_recovered() {
    let fx = Fx::new("", 4);
    let (mut c1, own1) = fx.owner(P1);
    push(&mut c1, &fx.q, &[job("1", "v1", 1.0, 0.0)]).expect("push");
    let b = take(&mut fx.fetcher(P1, 1), &mut c1, &own1);

    let mut c2 = fx.sync();
    let mut own2 = Ownership::new(fx.q.clone(), P2, Splitter::Balanced).expect("owner");
    let first = own2.balance(&mut c2).expect("balance");
    assert!(
        first.acquired.is_empty(),
        "P1 is alive and holds every shard"
    );

    silence(&fx, P1);
    let took = own2.balance(&mut c2).expect("balance");
    assert_eq!(took.acquired, vec![0, 1, 2, 3]);
    assert_eq!(took.recovered, 1);
    let again = take(&mut fx.fetcher(P2, 1), &mut c2, &own2);
    assert_eq!(again.jobs[0].id, "1");
    assert_eq!(texts(&again.jobs[0].payloads), vec![("v1".into(), 1.0)]);
    // P1 comes back: its settle is refused, and it fetches nothing.
    assert!(settle_one(&mut c1, &fx.q, P1, &b, Outcome::Done, 25).lost);
    assert_eq!(
        fx.fetcher(P1, 1)
            .fetch(&mut c1, &[0, 1, 2, 3])
            .expect("fetch"),
        None
    );
}

fn leases(fx: &Fx) -> BTreeMap<u32, String> {
    hgetall(&mut fx.t.conn(), &fx.q.keys().leases())
        .into_iter()
        .map(|(s, o)| (s.parse().expect("shard"), o))
        .collect()
}

/// Every shard leased once, each process's view equal to the lease hash.
fn assert_partition(fx: &Fx, owners: &[(&str, &Ownership)]) -> Vec<usize> {
    let held = leases(fx);
    let mut all = BTreeSet::new();
    let mut sizes = Vec::new();
    for (who, own) in owners {
        let mine: Vec<u32> = held
            .iter()
            .filter(|(_, o)| o.as_str() == *who)
            .map(|(s, _)| *s)
            .collect();
        assert_eq!(own.owned(), mine, "{who}'s view matches the leases");
        for s in &mine {
            assert!(all.insert(*s), "shard {s} owned twice");
        }
        sizes.push(mine.len());
    }
    assert_eq!(
        all.len(),
        fx.q.shards_count() as usize,
        "every shard owned: {held:?}"
    );
    sizes
}

#[test]
fn shards_rebalance_as_processes_join_and_die_and_drain_before_hand_over() {
    let fx = Fx::new("", 6);
    let mut conns: Vec<SyncConn> = (0..3).map(|_| fx.sync()).collect();
    let mut owns: Vec<Ownership> = [P1, P2, P3]
        .iter()
        .map(|p| Ownership::new(fx.q.clone(), p, Splitter::Balanced).expect("owner"))
        .collect();
    let beat = |owns: &mut Vec<Ownership>, conns: &mut Vec<SyncConn>, who: &[usize]| {
        for &i in who {
            owns[i].balance(&mut conns[i]).expect("balance");
        }
    };
    beat(&mut owns, &mut conns, &[0]);
    assert_eq!(owns[0].owned().len(), 6);

    // P1 has an id in flight in a shard that will be P2's.
    let mut live = vec![P1.to_owned(), P2.to_owned()];
    live.sort();
    let offset = queue_core::ordered::lease::queue_offset(fx.q.name());
    let shard_for_p2 = (0..6)
        .find(|s| queue_core::ordered::lease::assignee(&live, offset, *s) == Some(P2))
        .expect("P2 gets a shard");
    let id = (0..1000)
        .map(|i| format!("id{i}"))
        .find(|id| fx.q.shard_of(id) == shard_for_p2)
        .expect("an id in that shard");
    push(&mut conns[0], &fx.q, &[job(&id, "x", 1.0, 0.0)]).expect("push");
    let batch = fx
        .fetcher(P1, 1)
        .fetch(&mut conns[0], &[shard_for_p2])
        .expect("fetch")
        .expect("due");

    // P2 joins: it waits for P1 to release; P1 releases all but the draining shard.
    beat(&mut owns, &mut conns, &[1, 0, 1]);
    assert!(owns[0].owned().contains(&shard_for_p2));
    assert!(!owns[0].fetchable().contains(&shard_for_p2), "draining");
    assert_eq!(owns[1].owned().len(), 2);
    settle_one(&mut conns[0], &fx.q, P1, &batch, Outcome::Done, 25);
    beat(&mut owns, &mut conns, &[0, 1]);
    assert_eq!(
        assert_partition(&fx, &[(P1, &owns[0]), (P2, &owns[1])]),
        vec![3, 3]
    );

    // P3 joins. A shard freed by one process is claimed at its assignee's next beat, so two rounds
    // of beats settle every hand-over.
    beat(&mut owns, &mut conns, &[2, 0, 1, 2, 0, 1]);
    assert_eq!(
        assert_partition(&fx, &[(P1, &owns[0]), (P2, &owns[1]), (P3, &owns[2])]),
        vec![2, 2, 2]
    );

    // P3 dies silently: P1 and P2 take its shards over within two rounds of beats (a shard the
    // new assignment moves between them changes hands at the second).
    silence(&fx, P3);
    beat(&mut owns, &mut conns, &[0, 1, 0, 1]);
    let held = leases(&fx);
    assert!(held.values().all(|o| o != P3), "{held:?}");
    let sizes = assert_partition(&fx, &[(P1, &owns[0]), (P2, &owns[1])]);
    assert_eq!(sizes, vec![3, 3]);

    // P2 leaves cleanly: P1 takes everything at its next beat.
    owns[1].leave(&mut conns[1]).expect("leave");
    beat(&mut owns, &mut conns, &[0]);
    assert_eq!(owns[0].owned().len(), 6);
}

/// A beat reads the in-flight counts, plans, then applies: a thread of the process may fetch from a
/// shard in between. The release must then be refused (the shard kept, draining), or the next owner
/// would recover that id and run it while it still runs here.
#[test]
fn a_shard_fetched_from_after_the_beat_looked_is_kept_draining_not_released() {
    let fx = Fx::new("", 4);
    let (mut c1, mut c2) = (fx.sync(), fx.sync());
    let mut p1 = Ownership::new(fx.q.clone(), P1, Splitter::Balanced).expect("owner");
    let mut p2 = Ownership::new(fx.q.clone(), P2, Splitter::Balanced).expect("owner");
    p1.balance(&mut c1).expect("balance");
    p2.balance(&mut c2).expect("balance"); // joins; every shard is P1's for now
    assert_eq!(p1.owned().len(), 4);
    assert!(p2.owned().is_empty());

    let mut live = vec![P1.to_owned(), P2.to_owned()];
    live.sort();
    let offset = queue_core::ordered::lease::queue_offset(fx.q.name());
    let shard = (0..4)
        .find(|s| queue_core::ordered::lease::assignee(&live, offset, *s) == Some(P2))
        .expect("P2 gets a shard");
    let id = (0..1000)
        .map(|i| format!("id{i}"))
        .find(|id| fx.q.shard_of(id) == shard)
        .expect("an id in that shard");
    push(&mut c1, &fx.q, &[job(&id, "x", 1.0, 0.0)]).expect("push");

    // P1's beat looks (nothing in flight), a P1 thread fetches from the shard, the beat applies.
    let snap = p1.look(&mut c1).expect("look");
    let batch = fx
        .fetcher(P1, 1)
        .fetch(&mut fx.sync(), &[shard])
        .expect("fetch")
        .expect("due");
    let b = p1.apply(&mut c1, &snap).expect("apply");
    assert!(!b.released.contains(&shard), "{b:?}");
    assert_eq!(leases(&fx).get(&shard).map(String::as_str), Some(P1));
    assert!(p1.owned().contains(&shard));
    assert!(!p1.fetchable().contains(&shard), "draining");

    // P2 cannot take it, so nothing recovers the id while it runs.
    p2.balance(&mut c2).expect("balance");
    assert!(!p2.owned().contains(&shard));
    assert!(fx.has(&format!("processing:payloads:{id}")));

    // Settled, the shard is released at P1's next beat and claimed at P2's.
    settle_one(&mut c1, &fx.q, P1, &batch, Outcome::Done, 25);
    p1.balance(&mut c1).expect("balance");
    p2.balance(&mut c2).expect("balance");
    assert!(p2.owned().contains(&shard));
    assert!(!p1.owned().contains(&shard));
    assert_eq!(fx.count("processed"), 1);
}

// ---- bad data --------------------------------------------------------------------------------------

#[test]
fn a_payload_key_that_is_not_a_sorted_set_goes_to_the_morgue_kept_and_explained() {
    let fx = Fx::new("", 1);
    let (mut conn, own) = fx.owner(P1);
    push(
        &mut conn,
        &fx.q,
        &[job("bad", "x", 1.0, 0.0), job("good", "y", 1.0, 1.0)],
    )
    .expect("push");
    let mut c = fx.t.conn();
    redis::cmd("DEL")
        .arg(fx.key("payloads:bad"))
        .query::<i64>(&mut c)
        .expect("DEL");
    redis::cmd("SET")
        .arg(fx.key("payloads:bad"))
        .arg("garbage")
        .query::<()>(&mut c)
        .expect("SET");
    let b = take(&mut fx.fetcher(P1, 5), &mut conn, &own);
    assert_eq!(b.jobs.len(), 1);
    assert_eq!(b.jobs[0].id, "good");
    let err = hget(&mut c, &fx.key("morgue:errors"), "bad").expect("an error");
    assert!(err.contains("not a sorted set"), "{err}");
    let kept: String = redis::cmd("GET")
        .arg(fx.key("morgue:invalid:payloads:bad"))
        .query(&mut c)
        .expect("GET");
    assert_eq!(kept, "garbage");

    // A push onto that id while the bad key is back writes nothing at all.
    redis::cmd("SET")
        .arg(fx.key("payloads:bad"))
        .arg("garbage")
        .query::<()>(&mut c)
        .expect("SET");
    let e = push(
        &mut conn,
        &fx.q,
        &[job("other", "z", 1.0, 0.0), job("bad", "x", 1.0, 0.0)],
    )
    .expect_err("a bad key refuses the bulk");
    assert!(e.to_string().contains("not a sorted set"), "{e}");
    assert!(!exists(&mut c, &fx.key("payloads:other")));
}

// ---- morgue actions ----------------------------------------------------------------------------

/// Sends each id to the morgue (one payload each, max_retry_count 0).
fn kill(fx: &Fx, conn: &mut SyncConn, own: &Ownership, ids: &[&str]) {
    let jobs: Vec<_> = ids
        .iter()
        .map(|id| job(id, &format!("p{id}"), 1.0, 0.0))
        .collect();
    push(conn, &fx.q, &jobs).expect("push");
    let mut f = fx.fetcher(P1, 100);
    while let Some(b) = f.fetch(conn, &own.fetchable()).expect("fetch") {
        settle_one(conn, &fx.q, P1, &b, fail("dead", 0.0), 0);
    }
}

#[test]
fn the_morgue_lists_by_id_or_updated_at_a_page_at_a_time() {
    let fx = Fx::new("", 1);
    let (mut conn, own) = fx.owner(P1);
    for id in ["b", "c", "a"] {
        kill(&fx, &mut conn, &own, &[id]);
    }
    let ids = |v: Vec<morgue::MorgueJob>| v.into_iter().map(|j| j.id).collect::<Vec<_>>();
    let by_id = morgue::list(&mut conn, &fx.q, MorgueOrder::Id, false, 0, 10).expect("list");
    assert_eq!(by_id[0].error.as_deref(), Some("dead"));
    assert_eq!(texts(&by_id[0].payloads), vec![("pa".into(), 1.0)]);
    assert!(by_id[0].updated_at.is_some());
    assert_eq!(ids(by_id), vec!["a", "b", "c"]);
    assert_eq!(
        ids(morgue::list(&mut conn, &fx.q, MorgueOrder::UpdatedAt, false, 0, 10).expect("list")),
        vec!["b", "c", "a"]
    );
    assert_eq!(
        ids(morgue::list(&mut conn, &fx.q, MorgueOrder::UpdatedAt, true, 1, 1).expect("list")),
        vec!["c"]
    );
    assert!(
        morgue::list(&mut conn, &fx.q, MorgueOrder::Id, false, 5, 10)
            .expect("list")
            .is_empty()
    );
}

#[test]
fn requeue_from_the_morgue_merges_due_now_as_fresh() {
    let fx = Fx::new("", 1);
    let (mut conn, own) = fx.owner(P1);
    kill(&fx, &mut conn, &own, &["1", "2"]);
    // "1" is queued again meanwhile, due later.
    let later = fx.now() + 3600.0;
    push(&mut conn, &fx.q, &[job("1", "new", 5.0, later)]).expect("push");
    let before = fx.now();
    assert_eq!(
        morgue::requeue(&mut conn, &fx.q, &["1".into(), "nope".into()]).expect("requeue"),
        1
    );
    assert_eq!(
        fx.payloads("payloads:1"),
        vec![("p1".into(), 1.0), ("new".into(), 5.0)]
    );
    let at = fx.perform_in("1").expect("queued");
    assert!(at >= before && at <= fx.now(), "due now, not at {at}");
    assert_eq!(fx.retry_count("1"), Some(-1.0));
    assert_eq!(fx.zscore("morgue:all_ids_lex", "1"), None);
    assert!(!fx.has("morgue:payloads:1"));

    assert_eq!(
        morgue::delete(&mut conn, &fx.q, &["2".into()]).expect("delete"),
        1
    );
    assert!(!fx.has("morgue:payloads:2"));
    assert_eq!(fx.field("morgue:errors", "2"), None);
}

#[test]
fn all_at_once_actions() {
    let fx = Fx::new("", 3);
    let (mut conn, own) = fx.owner(P1);
    kill(&fx, &mut conn, &own, &["m1", "m2", "m3"]);
    assert_eq!(
        morgue::requeue_all(&mut conn, &fx.q).expect("requeue all"),
        3
    );
    assert!(fx.perform_in("m2").is_some());
    let mut f = fx.fetcher(P1, 100);
    while let Some(b) = f.fetch(&mut conn, &own.fetchable()).expect("fetch") {
        settle_one(&mut conn, &fx.q, P1, &b, fail("dead", 0.0), 0);
    }
    assert_eq!(morgue::delete_all(&mut conn, &fx.q).expect("delete all"), 3);
    assert!(
        morgue::list(&mut conn, &fx.q, MorgueOrder::Id, false, 0, 10)
            .expect("list")
            .is_empty()
    );

    // perform_all_jobs_now: ids due later become due now.
    let later = fx.now() + 3600.0;
    push(
        &mut conn,
        &fx.q,
        &[job("x", "x", 1.0, later), job("y", "y", 1.0, 5.0)],
    )
    .expect("push");
    assert_eq!(
        morgue::perform_all_jobs_now(&mut conn, &fx.q).expect("now"),
        1
    );
    assert!(fx.perform_in("x").expect("queued") <= fx.now());
    assert_eq!(fx.perform_in("y"), Some(5.0));

    // kill_all_failed_jobs / delete_all_failed_jobs touch only ids that failed.
    let b = take(&mut fx.fetcher(P1, 1), &mut conn, &own);
    let failed_id = b.jobs[0].id.clone();
    settle_one(&mut conn, &fx.q, P1, &b, fail("oops", 3600.0), 25);
    assert_eq!(
        morgue::kill_all_failed_jobs(&mut conn, &fx.q).expect("kill"),
        1
    );
    assert_eq!(fx.perform_in(&failed_id), None);
    assert_eq!(
        fx.field("morgue:errors", &failed_id).as_deref(),
        Some("oops")
    );
    assert_eq!(
        fx.payloads(&format!("morgue:payloads:{failed_id}")).len(),
        1
    );
    let fresh = if failed_id == "x" { "y" } else { "x" };
    assert!(fx.perform_in(fresh).is_some(), "a fresh id stays queued");

    let b = take(&mut fx.fetcher(P1, 1), &mut conn, &own);
    settle_one(&mut conn, &fx.q, P1, &b, fail("oops", 3600.0), 25);
    assert_eq!(
        morgue::delete_all_failed_jobs(&mut conn, &fx.q).expect("drop"),
        1
    );
    assert_eq!(fx.perform_in(fresh), None);
    assert!(!fx.has(&format!("payloads:{fresh}")));
    assert_eq!(fx.zscore("morgue:all_ids_lex", fresh), None);
}

// ---- stats -----------------------------------------------------------------------------------------

#[test]
fn stats_in_lowkiqs_shape() {
    let fx = Fx::new("", 2);
    let (mut conn, own) = fx.owner(P1);
    kill(&fx, &mut conn, &own, &["dead"]);
    let now = fx.now();
    push(
        &mut conn,
        &fx.q,
        &[
            job("late", "x", 1.0, now - 100.0),
            job("future", "y", 1.0, now + 100.0),
        ],
    )
    .expect("push");
    let other = OrderedQueue::new("", "Other", 2).expect("queue");
    let doc = stats::stats(&mut conn, &[("ATestWorker", &fx.q), ("Other", &other)]).expect("stats");
    assert_eq!(doc["by_worker"]["ATestWorker"]["length"], 2);
    assert_eq!(doc["by_worker"]["ATestWorker"]["morgue_length"], 1);
    let lag = doc["by_worker"]["ATestWorker"]["lag"]
        .as_f64()
        .expect("lag");
    assert!((100.0..110.0).contains(&lag), "lag {lag}");
    assert_eq!(doc["by_worker"]["Other"]["length"], 0);
    assert_eq!(doc["by_worker"]["Other"]["lag"].as_f64(), Some(0.0));
    assert_eq!(doc["total"]["length"], 2);
    assert_eq!(doc["total"]["morgue_length"], 1);
    assert_eq!(doc["total"]["lag"].as_f64(), Some(lag));
    // The dashboard's extra numbers: one failure (the morgue), nothing processed; one id in flight.
    let b = take(&mut fx.fetcher(P1, 1), &mut conn, &own);
    assert_eq!(b.jobs[0].id, "late");
    let per = stats::queue_stats(&mut conn, [&fx.q, &other]).expect("stats");
    assert_eq!((per[0].processed, per[0].failed, per[0].busy), (0, 1, 1));
    assert_eq!(per[0].length, 1);
    assert_eq!(per[1], stats::QueueStats::default());
    let total_keys: Vec<_> = doc["total"]
        .as_object()
        .expect("object")
        .keys()
        .cloned()
        .collect();
    assert_eq!(total_keys, vec!["length", "morgue_length", "lag"]);
}

// ---- the beat thread -------------------------------------------------------------------------------

#[test]
fn beat_threads_share_the_shards_hand_them_over_on_stop_and_take_them_over_from_a_silent_process() {
    use queue_core::ordered::runner::OrderedShards;
    use std::time::Duration;
    let fx = Fx::new("", 6);
    let redis = fx.t.redis();
    // Fast beats and a short death, so the test waits milliseconds; the logic is the production one.
    let owner = |who: &str| {
        Ownership::new(fx.q.clone(), who, Splitter::Balanced)
            .expect("owner")
            .with_dead_after(Duration::from_millis(400))
    };
    let beat = Duration::from_millis(20);
    let p1 = OrderedShards::start_with_interval(&redis, vec![owner(P1)], beat).expect("start");
    assert_eq!(
        p1.owned("ATestWorker").len(),
        6,
        "the first beat runs in start"
    );
    let p2 = OrderedShards::start_with_interval(&redis, vec![owner(P2)], beat).expect("start");
    let split = |a: &OrderedShards, b: &OrderedShards| {
        let held = leases(&fx);
        let count = |who: &str| held.values().filter(|o| o.as_str() == who).count();
        held.len() == 6
            && count(P1) == 3
            && count(P2) == 3
            && a.owned("ATestWorker").len() == 3
            && b.owned("ATestWorker").len() == 3
    };
    wait_for("P1 and P2 to hold three shards each", || split(&p1, &p2));
    let t0 = p1.thread_shards("ATestWorker", 0, 2);
    let t1 = p1.thread_shards("ATestWorker", 1, 2);
    assert_eq!(t0.len() + t1.len(), 3);
    assert!(t0.iter().all(|s| !t1.contains(s)));

    // A clean stop releases at once; P1 takes everything at its next beats.
    p2.stop().expect("stop");
    wait_for("P1 to hold every shard", || {
        p1.owned("ATestWorker").len() == 6 && leases(&fx).values().all(|o| o == P1)
    });

    // P3 joins, then P1 falls silent (its beat thread ends, its leases stay): P3 takes over.
    let p3 = OrderedShards::start_with_interval(&redis, vec![owner(P3)], beat).expect("start");
    wait_for("P3 to get its half", || p3.owned("ATestWorker").len() == 3);
    drop(p1);
    wait_for("P3 to take over the silent P1's shards", || {
        p3.owned("ATestWorker").len() == 6 && leases(&fx).values().all(|o| o == P3)
    });
    p3.stop().expect("stop");
    assert!(leases(&fx).is_empty());
}

#[test]
fn bad_data_met_while_settling_or_recovering_is_set_aside_and_the_rest_goes_on() {
    let fx = Fx::new("", 1);
    let (mut conn, own) = fx.owner(P1);
    let mut c = fx.t.conn();
    push(
        &mut conn,
        &fx.q,
        &[job("1", "v1", 1.0, 0.0), job("2", "w1", 1.0, 0.0)],
    )
    .expect("push");
    let b = take(&mut fx.fetcher(P1, 5), &mut conn, &own);
    assert_eq!(b.jobs.len(), 2);
    // While they run, something writes garbage where "1"'s queued payloads would go, and over "2"'s
    // in-flight payloads.
    redis::cmd("SET")
        .arg(fx.key("payloads:1"))
        .arg("garbage")
        .query::<()>(&mut c)
        .expect("SET");
    redis::cmd("SET")
        .arg(fx.key("processing:payloads:2"))
        .arg("junk")
        .query::<()>(&mut c)
        .expect("SET");
    let outcomes = vec![
        ("1".to_owned(), fail("boom", 0.0)),
        ("2".to_owned(), fail("boom", 0.0)),
    ];
    let s = settle(&mut conn, &fx.q, P1, b.shard, &outcomes, 25).expect("settle goes on");
    assert_eq!(s.failed, 2);
    // "1" is back with its own payload; the garbage is kept and explained in the morgue.
    assert_eq!(fx.payloads("payloads:1"), vec![("v1".into(), 1.0)]);
    assert_eq!(fx.retry_count("1"), Some(0.0));
    let kept: String = redis::cmd("GET")
        .arg(fx.key("morgue:invalid:payloads:1"))
        .query(&mut c)
        .expect("GET");
    assert_eq!(kept, "garbage");
    let why = hget(&mut c, &fx.key("morgue:errors"), "1").expect("explained");
    assert!(why.contains("morgue:invalid:payloads:1"), "{why}");
    // "2"'s in-flight payloads were the garbage: kept aside, explained, nothing left to retry.
    let kept: String = redis::cmd("GET")
        .arg(fx.key("morgue:invalid:processing:payloads:2"))
        .query(&mut c)
        .expect("GET");
    assert_eq!(kept, "junk");
    assert!(hget(&mut c, &fx.key("morgue:errors"), "2").is_some());
    assert_eq!(fx.perform_in("2"), None, "nothing of 2 is left to queue");

    // Recovery meets the same: a corrupt in-flight key is set aside, the other ids go back.
    push(
        &mut conn,
        &fx.q,
        &[job("3", "x1", 1.0, 0.0), job("4", "y1", 1.0, 0.0)],
    )
    .expect("push");
    let mut f = fx.fetcher(P1, 10);
    let mut held = Vec::new();
    while let Some(b) = f.fetch(&mut conn, &own.fetchable()).expect("fetch") {
        held.extend(b.jobs.into_iter().map(|j| j.id));
    }
    assert!(
        held.contains(&"3".to_owned()) && held.contains(&"4".to_owned()),
        "{held:?}"
    );
    redis::cmd("SET")
        .arg(fx.key("processing:payloads:3"))
        .arg("junk")
        .query::<()>(&mut c)
        .expect("SET");
    redis::cmd("SET")
        .arg(fx.key("payloads:3"))
        .arg("more junk")
        .query::<()>(&mut c)
        .expect("SET");
    let recovered = own.recover(&mut conn, 0).expect("recovery goes on");
    assert_eq!(recovered as usize, held.len());
    assert_eq!(fx.payloads("payloads:4"), vec![("y1".into(), 1.0)]);
    assert!(exists(
        &mut c,
        &fx.key("morgue:invalid:processing:payloads:3")
    ));
    assert!(exists(&mut c, &fx.key("morgue:invalid:payloads:3")));
}
