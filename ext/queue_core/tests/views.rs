//! The operator's views of ordered queues and deduplication against a real Redis: each shard's
//! length, lag, in-flight ids and lease owner; the idempotency keys held, walked a bounded `SCAN`
//! step at a time, and released by hand (only from the job that holds it, when named).

mod support;

use std::collections::BTreeSet;

use queue_core::api::dedup;
use queue_core::dedup::{digest, DedupJob, FlagCheck, PushOptions};
use queue_core::link::blocking::{BlockingConn, SyncConn};
use queue_core::ordered::lease::{Ownership, Splitter};
use queue_core::ordered::push::{push, NewJob};
use queue_core::ordered::{shard_of, shards, OrderedQueue};

use support::*;

fn run<T>(
    t: &TestRedis,
    op: impl AsyncFnOnce(&mut queue_core::link::connection::Conn) -> queue_core::Result<T>,
) -> queue_core::Result<T> {
    BlockingConn::new(&t.redis()).expect("connection").run(op)
}

fn redis_now(c: &mut redis::Connection) -> f64 {
    let (s, us): (u64, u64) = redis::cmd("TIME").query(c).expect("TIME");
    s as f64 + us as f64 / 1e6
}

#[test]
fn shards_show_length_lag_and_the_lease_owner_until_it_lapses() {
    let t = TestRedis::with_namespace("ns:");
    let q = OrderedQueue::new("ns:", "ShardWorker", 3).expect("queue");
    let mut conn = SyncConn::new(&t.redis());
    let mut raw = t.conn();
    let now = redis_now(&mut raw);
    // Ids spread over the shards; one due 30 s ago, the rest due in an hour.
    let ids: Vec<String> = (0..12).map(|i| format!("id-{i}")).collect();
    let late = &ids[0];
    let jobs: Vec<NewJob> = ids
        .iter()
        .map(|id| NewJob {
            id: id.clone(),
            payload: b"{}".to_vec(),
            score: 1.0,
            perform_in: if id == late { now - 30.0 } else { now + 3600.0 },
        })
        .collect();
    push(&mut conn, &q, &jobs).expect("push");

    // Nobody owns anything yet.
    let before = shards::shards(&mut conn, &q).expect("shards");
    assert_eq!(
        before.iter().map(|s| s.index).collect::<Vec<_>>(),
        [0, 1, 2]
    );
    assert!(before.iter().all(|s| s.owner.is_none()));
    for s in &before {
        let expected = ids.iter().filter(|id| shard_of(id, 3) == s.index).count() as u64;
        assert_eq!(s.length, expected, "shard {}", s.index);
        assert_eq!(s.busy, 0);
        if s.index == shard_of(late, 3) {
            assert!((29.0..40.0).contains(&s.lag), "lag {}", s.lag);
        } else {
            assert_eq!(s.lag, 0.0, "shard {} has nothing due", s.index);
        }
    }

    // One process takes every shard: each names it, alive, expiring DEAD_AFTER after its beat.
    let owner = "host:1:aaaaaaaaaaaa";
    let mut own = Ownership::new(q.clone(), owner, Splitter::Default).expect("owner");
    own.balance(&mut conn).expect("balance");
    let held = shards::shards(&mut conn, &q).expect("shards");
    for s in &held {
        let o = s.owner.as_ref().expect("owned");
        assert_eq!(o.identity, owner);
        assert!(o.alive);
        let beat = o.last_beat.expect("beat");
        assert!((beat - now).abs() < 5.0);
        assert_eq!(o.expires_at, Some(beat + 15.0));
    }

    // Its beat gone from the members (it fell silent and was pruned): the lease is shown lapsed.
    redis::cmd("ZREM")
        .arg(q.keys().members())
        .arg(owner)
        .query::<i64>(&mut raw)
        .expect("ZREM");
    let lapsed = shards::shards(&mut conn, &q).expect("shards");
    for s in &lapsed {
        let o = s.owner.as_ref().expect("still named");
        assert_eq!(
            (o.identity.as_str(), o.alive, o.expires_at),
            (owner, false, None)
        );
    }

    // It leaves (a clean stop): no owner at all.
    own.balance(&mut conn).expect("beat again");
    own.leave(&mut conn).expect("leave");
    assert!(shards::shards(&mut conn, &q)
        .expect("shards")
        .iter()
        .all(|s| s.owner.is_none()));
}

fn dedup_push(t: &TestRedis, queue: &str, class: &str, jid: &str, ttl: u64) -> String {
    let args = format!("[\"{jid}\"]");
    let job = DedupJob {
        jid: jid.to_owned(),
        json: format!(r#"{{"class":"{class}","args":{args},"queue":"{queue}","jid":"{jid}"}}"#)
            .into_bytes(),
        args: args.clone().into_bytes(),
        at: None,
    };
    let opts = PushOptions {
        class: class.to_owned(),
        ttl,
        idempotent: true,
        reschedule: false,
        flag: FlagCheck::Given(false),
    };
    let mut conn = SyncConn::new(&t.redis());
    queue_core::dedup::push_sync(&mut conn, queue, &opts, &[job]).expect("dedup push");
    t.redis()
        .keys()
        .duplicate(queue, &digest(class, args.as_bytes()))
}

/// Every key of a whole walk, and how many steps it took.
fn walk(t: &TestRedis, count: usize, queue: Option<&str>) -> (Vec<dedup::HeldKey>, usize) {
    let (mut cursor, mut out, mut steps) = (0, Vec::new(), 0);
    loop {
        let step = run(t, async |c| dedup::page(c, cursor, count, queue).await).expect("step");
        steps += 1;
        assert!(
            step.keys.len() <= count * 2,
            "a step of COUNT {count} returned {}",
            step.keys.len()
        );
        out.extend(step.keys);
        cursor = step.cursor;
        if cursor == 0 {
            return (out, steps);
        }
    }
}

#[test]
fn held_keys_are_walked_a_bounded_step_at_a_time_with_their_jid_and_ttl() {
    let t = TestRedis::with_namespace("resque:gitlab:");
    let mut raw = t.conn();
    let mut expected = BTreeSet::new();
    for i in 0..300 {
        let queue = if i % 3 == 0 {
            "pipeline:processing"
        } else {
            "mail"
        };
        let key = dedup_push(&t, queue, "W", &format!("{i:024x}"), 600);
        expected.insert(key);
    }
    // Noise the pattern or the TYPE must leave out: another namespace, a side hash, other keys.
    redis::cmd("SET")
        .arg("duplicate:mail:feed")
        .arg("x")
        .query::<()>(&mut raw)
        .unwrap();
    let some = expected.iter().next().cloned().unwrap();
    redis::cmd("HSET")
        .arg(format!("{some}:meta"))
        .arg("dropped")
        .arg("1")
        .query::<()>(&mut raw)
        .unwrap();
    for i in 0..200 {
        redis::cmd("SET")
            .arg(format!("resque:gitlab:other:{i}"))
            .arg(1)
            .query::<()>(&mut raw)
            .unwrap();
    }

    let (keys, steps) = walk(&t, 50, None);
    let found: BTreeSet<String> = keys.iter().map(|k| k.key.clone()).collect();
    assert_eq!(found, expected);
    assert_eq!(keys.len(), expected.len(), "a key listed twice");
    assert!(steps > 5, "{steps} steps of COUNT 50 over 800 keys");
    for k in &keys {
        assert_eq!(k.jid.len(), 24);
        assert!((590_000..=600_000).contains(&k.ttl_ms), "ttl {}", k.ttl_ms);
        let queue = k.queue.as_deref().expect("queue");
        assert!(k
            .key
            .starts_with(&format!("resque:gitlab:duplicate:{queue}:")));
    }
    let n = u64::from_str_radix(&keys[0].jid, 16).unwrap();
    assert_eq!(
        keys[0].queue.as_deref(),
        Some(if n % 3 == 0 {
            "pipeline:processing"
        } else {
            "mail"
        })
    );

    // One queue only, its name taken literally (its colon is no separator to the pattern).
    let (only, _) = walk(&t, 100, Some("pipeline:processing"));
    assert_eq!(only.len(), 100);
    assert!(only
        .iter()
        .all(|k| k.queue.as_deref() == Some("pipeline:processing")));
    let (none, _) = walk(&t, 100, Some("pipeline"));
    assert!(none.is_empty());

    // A key without expiry shows -1.
    redis::cmd("PERSIST")
        .arg(&some)
        .query::<i64>(&mut raw)
        .unwrap();
    let (keys, _) = walk(&t, 1000, None);
    assert_eq!(keys.iter().find(|k| k.key == some).unwrap().ttl_ms, -1);

    assert!(run(&t, async |c| dedup::page(c, 0, 0, None).await).is_err());
    assert!(run(&t, async |c| dedup::page(c, 0, 1001, None).await).is_err());
}

#[test]
fn a_key_is_released_by_hand_only_from_the_job_named() {
    let t = TestRedis::start();
    let mut raw = t.conn();
    let key = dedup_push(&t, "default", "W", "aaaaaaaaaaaaaaaaaaaaaaaa", 600);
    let meta = format!("{key}:meta");
    redis::cmd("HSET")
        .arg(&meta)
        .arg("dropped")
        .arg("1")
        .query::<()>(&mut raw)
        .unwrap();

    let wrong = run(&t, async |c| {
        dedup::release(c, &key, Some("bbbbbbbbbbbbbbbbbbbbbbbb")).await
    })
    .unwrap();
    assert!(!wrong);
    assert!(exists(&mut raw, &key));
    let released = run(&t, async |c| {
        dedup::release(c, &key, Some("aaaaaaaaaaaaaaaaaaaaaaaa")).await
    })
    .unwrap();
    assert!(released);
    assert!(!exists(&mut raw, &key) && !exists(&mut raw, &meta));
    assert!(!run(&t, async |c| dedup::release(c, &key, None).await).unwrap());

    // The next push of the same job is not a duplicate any more.
    let again = dedup_push(&t, "default", "W", "aaaaaaaaaaaaaaaaaaaaaaaa", 600);
    assert_eq!(again, key);
    assert!(run(&t, async |c| dedup::release(c, &key, None).await).unwrap());

    for bad in ["queue:default", "duplicate:nodigest", "x"] {
        let err = run(&t, async |c| dedup::release(c, bad, None).await).unwrap_err();
        assert!(
            err.to_string().contains("is not an idempotency key"),
            "{err}"
        );
    }
    let err = run(&t, async |c| dedup::release(c, &meta, None).await).unwrap_err();
    assert!(err.to_string().contains("is not an idempotency key"));
}
