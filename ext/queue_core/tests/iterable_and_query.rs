//! Against a real Redis: the `it-<jid>` hash of iterable jobs (`queue_core::iterable`) in Sidekiq
//! 7.3's layout, and the Metrics page query (`metrics::sidekiq_query`) over keys written by the
//! same flush code the server uses (`metrics::sidekiq::writes`), both versions.

mod support;

use std::time::Duration;

use queue_core::iterable;
use queue_core::link::blocking::BlockingConn;
use queue_core::metrics::sidekiq::{self, Minute, Version};
use queue_core::metrics::sidekiq_query;

use support::*;

#[test]
fn iteration_state_is_sidekiqs_hash() {
    let t = TestRedis::with_namespace("ns:");
    let mut bc = BlockingConn::new(&t.redis()).expect("conn");
    let mut c = t.conn();
    assert_eq!(
        bc.run(async |c| iterable::load(c, "j1").await).unwrap(),
        None
    );

    let cancelled = bc
        .run(async |c| iterable::save(c, "j1", "2", "[3,\"x\"]", "1.25").await)
        .unwrap();
    assert_eq!(cancelled, None);
    let mut fields = hgetall(&mut c, "ns:it-j1");
    fields.sort();
    assert_eq!(
        fields,
        vec![
            ("c".to_owned(), "[3,\"x\"]".to_owned()),
            ("ex".to_owned(), "2".to_owned()),
            ("rt".to_owned(), "1.25".to_owned())
        ]
    );
    let ttl = ttl(&mut c, "ns:it-j1");
    assert!(ttl > 29 * 24 * 3600 && ttl <= iterable::STATE_TTL as i64);
    let loaded = bc.run(async |c| iterable::load(c, "j1").await).unwrap();
    assert_eq!(
        loaded,
        Some(iterable::Progress {
            executions: Some("2".to_owned()),
            cursor: Some("[3,\"x\"]".to_owned()),
            runtime: Some("1.25".to_owned()),
        })
    );

    // The first cancel's second stays; a save then reports it.
    assert_eq!(
        bc.run(async |c| iterable::cancel(c, "j1", 1_700_000_000).await)
            .unwrap(),
        1_700_000_000
    );
    assert_eq!(
        bc.run(async |c| iterable::cancel(c, "j1", 1_700_000_099).await)
            .unwrap(),
        1_700_000_000
    );
    let cancelled = bc
        .run(async |c| iterable::save(c, "j1", "3", "4", "2.5").await)
        .unwrap();
    assert_eq!(cancelled.as_deref(), Some("1700000000"));

    // A hash holding only "cancelled" has no progress to resume from.
    bc.run(async |c| iterable::cancel(c, "j2", 5).await)
        .unwrap();
    assert_eq!(
        bc.run(async |c| iterable::load(c, "j2").await).unwrap(),
        None
    );
    assert_eq!(
        bc.run(async |c| iterable::cancelled(c, "j2").await)
            .unwrap()
            .as_deref(),
        Some("5")
    );
    assert!(bc.run(async |c| iterable::delete(c, "j1").await).unwrap());
    assert!(!exists(&mut c, "ns:it-j1"));
}

fn minute(m: i64, ok_ms: &[u64], failed: usize) -> Minute {
    let mut out = Minute::new(m);
    for &ms in ok_ms {
        out.observe(Duration::from_millis(ms), true);
    }
    for _ in 0..failed {
        out.observe(Duration::from_millis(1), false);
    }
    out
}

#[test]
fn the_query_reads_back_what_the_flush_wrote() {
    for version in [Version::V7, Version::V8] {
        let t = TestRedis::start();
        let redis = t.redis();
        let mut bc = BlockingConn::new(&redis).expect("conn");
        let now = sidekiq::now_minute();
        let a_now = minute(now, &[10, 40, 400], 1);
        let a_before = minute(now - 70, &[25], 0);
        let b_old = minute(now - 200, &[5], 2);
        let mut pipe = redis::pipe();
        sidekiq::writes(
            &mut pipe,
            redis.keys(),
            version,
            [("A", &a_now), ("A", &a_before), ("B", &b_old)],
        )
        .unwrap();
        bc.run(async |c| c.pipe::<()>(&pipe).await).unwrap();

        let hour = bc
            .run(async |c| sidekiq_query::query(c, version, now, 60, Some("A")).await)
            .unwrap();
        let a = &hour.classes["A"];
        assert_eq!((a.processed, a.failed, a.ms), (4, 1, 450), "{version:?}");
        assert!(!hour.classes.contains_key("B"));
        let hist = hour.histogram.expect("A's histogram");
        assert_eq!(hist.iter().sum::<u64>(), 3);
        assert_eq!((hist[0], hist[2], hist[8]), (1, 1, 1));

        let eight = bc
            .run(async |c| sidekiq_query::query(c, version, now, 480, Some("A")).await)
            .unwrap();
        assert_eq!(eight.classes["A"].processed, 5);
        assert_eq!(
            (eight.classes["B"].processed, eight.classes["B"].failed),
            (3, 2)
        );
        assert_eq!(eight.histogram.expect("hist")[1], 1, "the 25 ms job");
        let none = bc
            .run(async |c| sidekiq_query::query(c, version, now, 60, None).await)
            .unwrap();
        assert_eq!(none.histogram, None);
        let bad = bc.run(async |c| sidekiq_query::query(c, version, now, 0, None).await);
        assert!(bad.is_err());
    }
}
