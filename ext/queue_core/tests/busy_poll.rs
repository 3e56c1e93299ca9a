//! A client's connection polls its socket for each reply for a moment before it sleeps
//! (`link::busy_poll`), over plain TCP; a reply slower than the limit makes it back off. Against a
//! real Redis: every call still reads its own reply, whatever the connection's reply mode, and the
//! polling's counts say what it did.

mod support;

use std::time::{Duration, Instant};

use queue_core::link::blocking::{Due, SyncConn};
use queue_core::link::busy_poll::PollCounts;
use queue_core::{client, Redis, RedisConfig};

use support::*;

/// Longer than any reply of a local Redis takes, even on a loaded machine: a miss would be a bug.
const NEVER_MISSED: Duration = Duration::from_secs(2);

fn polling_redis(r: &TestRedis, limit: Duration) -> Redis {
    Redis::new(RedisConfig::new(&r.url(), "").with_busy_poll(limit)).expect("a Redis")
}

/// A server over TCP, a connection to check it with, a list key, and a polling connection that has
/// made its first call.
fn polled_list() -> (TestRedis, redis::Connection, String, SyncConn) {
    let r = TestRedis::start_tcp();
    let check = r.conn();
    let key = r.key("list");
    let mut conn = SyncConn::polling(&polling_redis(&r, NEVER_MISSED));
    ping(&mut conn);
    (r, check, key, conn)
}

fn ping(conn: &mut SyncConn) {
    let pong: String = conn.cmd(&redis::cmd("PING")).expect("PING");
    assert_eq!(pong, "PONG");
}

fn counts(hits: u64, misses: u64, skipped: u64) -> Option<PollCounts> {
    Some(PollCounts {
        hits,
        misses,
        skipped,
    })
}

#[test]
fn a_client_connection_over_tcp_finds_each_reply_by_polling() {
    let r = TestRedis::start_tcp();
    let mut check = r.conn();
    let mut conn = SyncConn::polling(&polling_redis(&r, NEVER_MISSED));
    for _ in 0..50 {
        ping(&mut conn);
    }
    assert_eq!(conn.poll_counts(), counts(50, 0, 0), "one poll per call");

    // A pipeline (a push: SADD and LPUSH) is one write, one poll, and reads all its replies.
    client::push_sync(
        &mut conn,
        "default",
        &[job("default", 1), job("default", 2)],
    )
    .expect("push");
    assert_eq!(conn.poll_counts(), counts(51, 0, 0));
    assert_eq!(llen(&mut check, &r.key("queue:default")), 2);
    // A server error in a pipeline is the caller's error, and the connection stays in step.
    let mut pipe = redis::pipe();
    pipe.cmd("INCR").arg(r.key("queue:default")).cmd("PING");
    let failed = conn.pipe::<(i64, String)>(&pipe);
    assert!(failed.is_err(), "INCR of a list fails: {failed:?}");
    ping(&mut conn);
}

#[test]
fn replies_switched_off_and_on_again_are_read_in_step() {
    let (_r, mut check, key, mut conn) = polled_list();

    let rpush = |v: &str| redis::cmd("RPUSH").arg(&key).arg(v).get_packed_command();
    conn.send_unreplied(&rpush("a"), Due::WithNextCall)
        .expect("write");
    conn.send_unreplied(&rpush("b"), Due::WithNextCall)
        .expect("write");
    // One write switches replies on and asks; its two replies are read after one poll.
    let len: i64 = conn.cmd(redis::cmd("LLEN").arg(&key)).expect("LLEN");
    assert_eq!(len, 2);
    assert_eq!(conn.poll_counts(), counts(2, 0, 0));
    // The same before a pipeline, which switches replies on in a write of its own.
    conn.send_unreplied(&rpush("c"), Due::WithNextCall)
        .expect("write");
    let (n, first): (i64, String) = conn
        .pipe(
            redis::pipe()
                .cmd("LLEN")
                .arg(&key)
                .cmd("LINDEX")
                .arg(&key)
                .arg(0),
        )
        .expect("pipeline");
    assert_eq!((n, first.as_str()), (3, "a"));
    assert_eq!(conn.poll_counts(), counts(4, 0, 0));
    assert_eq!(lrange(&mut check, &key).len(), 3);
}

#[test]
fn a_reply_slower_than_the_limit_makes_the_next_calls_sleep_at_once() {
    let r = TestRedis::start_tcp();
    let mut conn = SyncConn::polling(&polling_redis(&r, Duration::from_millis(20)));
    ping(&mut conn);

    // Redis answers an empty BLPOP after its timeout, 10 times the limit.
    let empty: Option<(String, String)> = conn
        .cmd(redis::cmd("BLPOP").arg(r.key("nothing")).arg(0.2))
        .expect("BLPOP");
    assert_eq!(empty, None);
    assert_eq!(conn.poll_counts(), counts(1, 1, 0));
    ping(&mut conn);
    ping(&mut conn);
    assert_eq!(conn.poll_counts(), counts(1, 1, 2), "two calls skipped");
    ping(&mut conn);
    assert_eq!(conn.poll_counts(), counts(2, 1, 2), "then polled again");
}

#[test]
fn a_polling_connection_does_not_hold_its_unreplied_writes() {
    let (_r, mut check, key, mut conn) = polled_list();

    let sent = Instant::now();
    conn.send_unreplied(
        &redis::cmd("RPUSH").arg(&key).arg("x").get_packed_command(),
        Due::WithNextCall,
    )
    .expect("write");
    wait_for("the write", || llen(&mut check, &key) == 1);
    // Held (a fetcher's connection), it would arrive after the kernel's ~200 ms.
    let took = sent.elapsed();
    assert!(took < Duration::from_millis(100), "took {took:?}");
}

#[test]
fn no_polling_without_a_limit_or_over_a_unix_socket() {
    let r = TestRedis::start_tcp();
    let mut off = SyncConn::polling(&polling_redis(&r, Duration::ZERO));
    ping(&mut off);
    assert_eq!(off.poll_counts(), None);

    let unix = TestRedis::start();
    let mut conn = SyncConn::polling(&unix.redis());
    ping(&mut conn);
    assert_eq!(conn.poll_counts(), None, "its socket is not looked for");
}
