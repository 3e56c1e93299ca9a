//! Batches against a real Redis, at the level of the engine's scripts: an acknowledgement written
//! twice (as a fetcher resends its unconfirmed acks after a broken connection) counts once, and each
//! callback job is pushed exactly once, `success` only after `complete`'s callbacks ran; the entries
//! servers of the versions before left are still applied.

mod support;

use queue_core::batch::settle::OkPrefix;
use queue_core::batch::{push, store, Member};
use queue_core::fetch::calls::AckHead;
use queue_core::fetch::Unit;
use queue_core::link::blocking::SyncConn;
use queue_core::scripts;
use redis::ConnectionLike;

use support::*;

const WORKING: &str = "jq:working:host:1:abc:t1:default";

/// Moves the oldest job of `queue` into the working list, as a fetch does; returns it.
fn take(c: &mut redis::Connection, queue: &str) -> Unit {
    let raw: Vec<u8> = redis::cmd("LMOVE")
        .arg(format!("queue:{queue}"))
        .arg(WORKING)
        .arg("RIGHT")
        .arg("LEFT")
        .query(c)
        .expect("a job to take");
    Unit::new(0, queue.into(), raw, WORKING.into())
}

/// Acknowledges `unit` with the batch's ack, twice.
fn ack_twice(c: &mut redis::Connection, redis: &queue_core::Redis, unit: &Unit) {
    let member = Member::of(&unit.raw).expect("a batch member");
    let mut packet = Vec::new();
    member.ack_packet(
        &mut packet,
        redis.keys(),
        unit,
        true,
        &mut OkPrefix::default(),
        &mut AckHead::default(),
    );
    let commands = member.ack_commands(true);
    for _ in 0..2 {
        // The record (SADDs, or an LPUSH), then the LREM: only the last reply is read.
        c.req_packed_commands(&packet, commands - 1, 1)
            .expect("ack");
    }
}

fn check(c: &mut redis::Connection) -> i64 {
    let mut inv = scripts::BATCH_CHECK.prepare_invoke();
    inv.key("jq:batch-dirty")
        .key("jq:batch-news")
        .key("jq:batch-acks")
        .key("jq:batch-checks")
        .arg("")
        .arg("1000.5")
        .arg(1000);
    inv.invoke(c).expect("check")
}

fn field(c: &mut redis::Connection, bid: &str, name: &str) -> Option<String> {
    redis::cmd("HGET")
        .arg(format!("jq:batch:{bid}"))
        .arg(name)
        .query(c)
        .expect("hget")
}

#[test]
fn acks_written_twice_count_once_and_each_callback_is_pushed_once() {
    let server = TestRedis::start();
    let redis = server.redis();
    let mut c = server.conn();
    let mut sync = SyncConn::new(&redis);
    let bid = "b1";
    let new = store::NewBatch {
        callback_queue: "default".into(),
        callbacks: "{}".into(),
        events: vec!["complete".into(), "success".into()],
        expires_in: 600,
        ..Default::default()
    };
    assert!(store::open(&mut sync, bid, Some(&new), true).expect("open"));
    let jobs: Vec<Vec<u8>> = ["j1", "j2"]
        .iter()
        .map(|jid| format!(r#"{{"class":"W","args":[],"jid":"{jid}","bid":"{bid}"}}"#).into_bytes())
        .collect();
    push::push_sync(&mut sync, bid, "work", &jobs).expect("push");
    assert!(store::close(&mut sync, bid).expect("close"));
    assert_eq!(field(&mut c, bid, "total").as_deref(), Some("2"));

    let first = take(&mut c, "work");
    ack_twice(&mut c, &redis, &first);
    assert_eq!(llen(&mut c, WORKING), 0, "the ack took the job");
    assert_eq!(smembers(&mut c, "jq:batch-dirty"), vec![bid.to_owned()]);
    assert_eq!(check(&mut c), 1);
    assert_eq!(field(&mut c, bid, "pending").as_deref(), Some("1"));
    assert_eq!(field(&mut c, bid, "unsettled").as_deref(), Some("1"));

    let second = take(&mut c, "work");
    ack_twice(&mut c, &redis, &second);
    assert_eq!(
        llen(&mut c, "queue:default"),
        0,
        "nothing fires before the checker"
    );
    assert_eq!(check(&mut c), 1);
    assert_eq!(check(&mut c), 0);
    assert_eq!(field(&mut c, bid, "pending").as_deref(), Some("0"));
    assert_eq!(field(&mut c, bid, "unsettled").as_deref(), Some("0"));
    assert_eq!(
        llen(&mut c, "queue:default"),
        1,
        "complete's callback, once"
    );
    assert!(
        field(&mut c, bid, "success_at").is_none(),
        "success waits for complete's callbacks"
    );

    let complete = take(&mut c, "default");
    assert!(String::from_utf8_lossy(&complete.raw).contains(r#""args":["complete","b1"]"#));
    ack_twice(&mut c, &redis, &complete);
    assert_eq!(check(&mut c), 2);
    assert!(field(&mut c, bid, "complete_done").is_some());
    assert_eq!(llen(&mut c, "queue:default"), 1, "success's callback, once");
    let success = take(&mut c, "default");
    ack_twice(&mut c, &redis, &success);
    assert_eq!(check(&mut c), 2);
    assert!(field(&mut c, bid, "success_done").is_some());
    assert_eq!(llen(&mut c, "queue:default"), 0);
    for key in ["jq:batch:b1", "jq:batch:b1:ok"] {
        let ttl: i64 = redis::cmd("TTL").arg(key).query(&mut c).expect("ttl");
        assert!((1..=600).contains(&ttl), "{key}: {ttl}");
    }

    // A late job of a batch whose data expired, one that failed before and one that did not:
    // acknowledged, and no key is kept for it.
    let _: () = redis::cmd("DEL")
        .arg("jq:batch:b1")
        .arg("jq:batch:b1:ok")
        .query(&mut c)
        .expect("del");
    for (late, taken) in [
        (&br#"{"class":"W","args":[],"jid":"j3","bid":"b1"}"#[..], 1),
        (
            br#"{"class":"W","args":[],"jid":"j4","bid":"b1","retry_count":0}"#,
            2,
        ),
    ] {
        let _: () = redis::cmd("LPUSH")
            .arg("queue:work")
            .arg(late)
            .query(&mut c)
            .expect("push");
        let unit = take(&mut c, "work");
        ack_twice(&mut c, &redis, &unit);
        assert_eq!(check(&mut c), taken);
        let left: Vec<String> = all_keys(&mut c)
            .into_iter()
            .filter(|k| k.starts_with("jq:batch"))
            .collect();
        assert_eq!(left, vec!["jq:batches".to_owned()]);
    }
}

#[test]
fn acks_counted_in_any_steps_count_each_job_once() {
    let server = TestRedis::start();
    let redis = server.redis();
    let mut c = server.conn();
    let mut sync = SyncConn::new(&redis);
    let bid = "b4";
    let jobs: Vec<Vec<u8>> = (0..8)
        .map(|n| format!(r#"{{"class":"W","args":[{n}],"jid":"j{n}","bid":"{bid}"}}"#).into_bytes())
        .collect();
    pushed_batch(&mut sync, bid, &jobs);
    for i in 0..8 {
        let unit = take(&mut c, "work");
        ack_twice(&mut c, &redis, &unit);
        if i % 3 == 0 {
            check(&mut c);
            // A status read counts what is waiting first (store.rs).
            let stored = store::status(&mut sync, bid)
                .expect("status")
                .expect("a batch");
            assert_eq!(stored.fields["pending"], (7 - i).to_string());
            // A batch that never succeeds leaves no set behind: it lives as long as the batch.
            let ttl: i64 = redis::cmd("TTL")
                .arg("jq:batch:b4:ok")
                .query(&mut c)
                .expect("ttl");
            assert!((1..=600).contains(&ttl), "{ttl}");
        }
    }
    check(&mut c);
    assert_eq!(field(&mut c, bid, "pending").as_deref(), Some("0"));
    assert_eq!(field(&mut c, bid, "unsettled").as_deref(), Some("0"));
    assert_eq!(field(&mut c, bid, "okn").as_deref(), Some("8"));
    assert!(field(&mut c, bid, "success_at").is_some());
    assert!(!exists(&mut c, "jq:batch-dirty"));
}

#[test]
fn a_job_that_failed_before_is_taken_off_the_failures_once() {
    let server = TestRedis::start();
    let redis = server.redis();
    let mut c = server.conn();
    let mut sync = SyncConn::new(&redis);
    let bid = "b2";
    let jobs: Vec<Vec<u8>> = ["j1", "j2"]
        .iter()
        .map(|jid| format!(r#"{{"class":"W","args":[],"jid":"{jid}","bid":"{bid}"}}"#).into_bytes())
        .collect();
    pushed_batch(&mut sync, bid, &jobs);
    // j1 failed into retry, as batch_fail.lua records it: on :failed, no longer unsettled.
    let _: () = redis::cmd("HSET")
        .arg("jq:batch:b2:failed")
        .arg("j1")
        .arg("{}")
        .query(&mut c)
        .expect("hset");
    let _: () = redis::cmd("HINCRBY")
        .arg("jq:batch:b2")
        .arg("unsettled")
        .arg(-1)
        .query(&mut c)
        .expect("hincrby");
    let _: () = redis::cmd("DEL")
        .arg("queue:work")
        .query(&mut c)
        .expect("del");
    let retried = br#"{"class":"W","args":[],"jid":"j1","bid":"b2","retry_count":0}"#.to_vec();
    let _: () = redis::cmd("LPUSH")
        .arg("queue:work")
        .arg(&retried)
        .query(&mut c)
        .expect("push");
    let unit = take(&mut c, "work");
    ack_twice(&mut c, &redis, &unit);
    assert_eq!(check(&mut c), 2);
    assert_eq!(field(&mut c, bid, "pending").as_deref(), Some("1"));
    assert_eq!(field(&mut c, bid, "unsettled").as_deref(), Some("1"));
    assert!(!exists(&mut c, "jq:batch:b2:failed"));
    assert!(field(&mut c, bid, "complete_at").is_none());

    // The late ack of an earlier copy of j1 (recovery requeued it from a server still running it)
    // finds its jid recorded: nothing more is counted.
    let late = br#"{"class":"W","args":[],"jid":"j1","bid":"b2"}"#.to_vec();
    let _: () = redis::cmd("LPUSH")
        .arg("queue:work")
        .arg(&late)
        .query(&mut c)
        .expect("push");
    let unit = take(&mut c, "work");
    ack_twice(&mut c, &redis, &unit);
    assert_eq!(check(&mut c), 1);
    assert_eq!(field(&mut c, bid, "pending").as_deref(), Some("1"));
    assert_eq!(field(&mut c, bid, "unsettled").as_deref(), Some("1"));
}

#[test]
fn the_markers_of_the_version_before_are_applied_beside_the_new_acks() {
    let server = TestRedis::start();
    let redis = server.redis();
    let mut c = server.conn();
    let mut sync = SyncConn::new(&redis);
    let bid = "b5";
    let jobs: Vec<Vec<u8>> = ["j1", "j2", "j3"]
        .iter()
        .map(|jid| format!(r#"{{"class":"W","args":[],"jid":"{jid}","bid":"{bid}"}}"#).into_bytes())
        .collect();
    pushed_batch(&mut sync, bid, &jobs);
    // j1 acknowledged by a server of the version before (its marker on jq:batch-acks), twice;
    // j2 by a new one; j3 by an old one whose marker an old checker already counted.
    let _: () = redis::cmd("LPUSH")
        .arg("jq:batch-acks")
        .arg("s2:b5j1")
        .arg("s2:b5j1")
        .query(&mut c)
        .expect("lpush");
    let unit = take(&mut c, "work");
    assert!(text(&unit.raw).contains(r#""jid":"j1""#));
    let unit = take(&mut c, "work");
    ack_twice(&mut c, &redis, &unit);
    let _: () = redis::cmd("SADD")
        .arg("jq:batch:b5:done")
        .arg("j3")
        .query(&mut c)
        .expect("sadd");
    for field_name in ["pending", "unsettled"] {
        let _: () = redis::cmd("HINCRBY")
            .arg("jq:batch:b5")
            .arg(field_name)
            .arg(-1)
            .query(&mut c)
            .expect("hincrby");
    }
    assert_eq!(check(&mut c), 2);
    assert_eq!(field(&mut c, bid, "pending").as_deref(), Some("0"));
    assert!(field(&mut c, bid, "success_at").is_some());
}

#[test]
fn the_markers_of_servers_before_the_plain_ack_are_applied() {
    let server = TestRedis::start();
    let redis = server.redis();
    let mut c = server.conn();
    let mut sync = SyncConn::new(&redis);
    let new = store::NewBatch {
        callback_queue: "default".into(),
        callbacks: "{}".into(),
        expires_in: 600,
        ..Default::default()
    };
    assert!(store::open(&mut sync, "b3", Some(&new), false).expect("open"));
    // An old server's ack counted the job itself and left `c <bid>` on jq:batch-checks.
    let _: () = redis::cmd("HSET")
        .arg("jq:batch:b3")
        .arg("total")
        .arg(1)
        .query(&mut c)
        .expect("hset");
    let _: () = redis::cmd("LPUSH")
        .arg("jq:batch-checks")
        .arg("c b3")
        .query(&mut c)
        .expect("lpush");
    assert_eq!(check(&mut c), 0, "none taken from jq:batch-acks");
    assert_eq!(llen(&mut c, "jq:batch-checks"), 0);
    assert!(field(&mut c, "b3", "complete_at").is_some());
    assert!(field(&mut c, "b3", "success_at").is_some());
}
