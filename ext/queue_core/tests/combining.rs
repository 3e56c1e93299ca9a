//! Client calls from many threads share one connection and its round trips (`link::combining`):
//! calls made while a write is in flight go out together in the next one, each still returns its
//! own replies (an error reply fails only its call), and a connection killed mid-flight fails every
//! call of that flight whose reply was not read, as a connection error, with nothing sent twice.
//!
//! To hold a flight open for as long as the test needs, one call is a `BLMOVE` from a gate key that the
//! test's own connection pushes to once the other calls are queued.

mod support;

use std::sync::{Arc, Barrier};
use std::thread;

use queue_core::link::blocking::SyncConn;
use queue_core::link::combining::CombineCounts;
use queue_core::{client, Redis};

use support::*;

/// What the shared connection has done, through a handle the test keeps (the connection lives as
/// long as some handle on it does).
fn counts(watch: &SyncConn) -> CombineCounts {
    watch
        .combine_counts()
        .expect("a handle on the shared connection")
}

/// Starts a thread whose call (`BLMOVE gate … 0`) holds a flight open until the gate is pushed to, and
/// waits until Redis has it blocked.
fn hold_a_flight(
    r: &TestRedis,
    redis: &Redis,
    check: &mut redis::Connection,
    gate: &str,
) -> thread::JoinHandle<()> {
    let (redis, gate_key) = (redis.clone(), r.key(gate));
    let held = thread::spawn(move || {
        let mut conn = SyncConn::combined(&redis);
        let _: String = conn
            .cmd(
                redis::cmd("BLMOVE")
                    .arg(&gate_key)
                    .arg(format!("{gate_key}:passed"))
                    .arg("LEFT")
                    .arg("RIGHT")
                    .arg(0),
            )
            .expect("the gate opens");
    });
    wait_for("the holding call to block", || blocked_clients(check) == 1);
    held
}

fn open_gate(r: &TestRedis, check: &mut redis::Connection, gate: &str) {
    let _: i64 = redis::cmd("LPUSH")
        .arg(r.key(gate))
        .arg("open")
        .query(check)
        .expect("LPUSH");
}

#[test]
fn calls_queued_behind_a_flight_go_out_together_in_the_next() {
    let r = TestRedis::start_tcp();
    let mut check = r.conn();
    let redis = r.redis();
    let watch = SyncConn::combined(&redis);
    let held = hold_a_flight(&r, &redis, &mut check, "gate");

    const THREADS: usize = 15;
    let pushers: Vec<_> = (0..THREADS)
        .map(|n| {
            let redis = redis.clone();
            thread::spawn(move || {
                let mut conn = SyncConn::combined(&redis);
                client::push_sync(&mut conn, "default", &[job("default", n)])
            })
        })
        .collect();
    wait_for("every pusher to queue", || counts(&watch).queued == THREADS);
    open_gate(&r, &mut check, "gate");
    held.join().expect("holding thread");
    for p in pushers {
        p.join().expect("pusher").expect("pushed");
    }

    let after = counts(&watch);
    assert_eq!(after.calls, 1 + THREADS as u64);
    assert_eq!(after.flights, 2, "the 15 pushes went out in one write");
    let mut queued = lrange(&mut check, &r.key("queue:default"));
    queued.sort();
    let mut expected: Vec<Vec<u8>> = (0..THREADS).map(|n| job("default", n)).collect();
    expected.sort();
    assert_eq!(queued, expected, "each job once");
    let clients: String = redis::cmd("CLIENT")
        .arg("LIST")
        .query(&mut check)
        .expect("CLIENT LIST");
    assert_eq!(
        clients.lines().count(),
        2,
        "one shared connection: {clients}"
    );
}

#[test]
fn many_threads_pushing_at_once_each_get_their_jobs_in_once() {
    let r = TestRedis::start_tcp();
    let mut check = r.conn();
    let redis = r.redis();
    let watch = SyncConn::combined(&redis);
    const THREADS: usize = 16;
    const EACH: usize = 300;
    let start = Arc::new(Barrier::new(THREADS));
    let pushers: Vec<_> = (0..THREADS)
        .map(|t| {
            let (redis, start) = (redis.clone(), Arc::clone(&start));
            thread::spawn(move || {
                let mut conn = SyncConn::combined(&redis);
                start.wait();
                for i in 0..EACH {
                    client::push_sync(&mut conn, "default", &[job("default", t * EACH + i)])
                        .expect("pushed");
                }
            })
        })
        .collect();
    for p in pushers {
        p.join().expect("pusher");
    }
    assert_eq!(
        llen(&mut check, &r.key("queue:default")),
        (THREADS * EACH) as i64
    );
    let mut queued = lrange(&mut check, &r.key("queue:default"));
    queued.sort();
    queued.dedup();
    assert_eq!(queued.len(), THREADS * EACH, "no job twice");
    let c = counts(&watch);
    assert_eq!(c.calls, (THREADS * EACH) as u64);
    assert!(c.flights <= c.calls, "{c:?}");
}

#[test]
fn an_error_reply_fails_only_the_call_it_answers() {
    let r = TestRedis::start_tcp();
    let mut check = r.conn();
    let redis = r.redis();
    let watch = SyncConn::combined(&redis);
    let _: () = redis::cmd("SET")
        .arg(r.key("text"))
        .arg("not a number")
        .query(&mut check)
        .expect("SET");
    let held = hold_a_flight(&r, &redis, &mut check, "gate");

    let push = |n: usize| {
        let redis = redis.clone();
        thread::spawn(move || {
            let mut conn = SyncConn::combined(&redis);
            client::push_sync(&mut conn, "default", &[job("default", n)])
        })
    };
    let first = push(1);
    wait_for("the first push to queue", || counts(&watch).queued == 1);
    let bad = {
        let (redis, key) = (redis.clone(), r.key("text"));
        thread::spawn(move || {
            let mut conn = SyncConn::combined(&redis);
            conn.cmd::<i64>(redis::cmd("INCR").arg(key))
        })
    };
    wait_for("the bad call to queue", || counts(&watch).queued == 2);
    let last = push(2);
    wait_for("the last push to queue", || counts(&watch).queued == 3);
    open_gate(&r, &mut check, "gate");
    held.join().expect("holding thread");

    first.join().expect("thread").expect("the first push");
    last.join().expect("thread").expect("the last push");
    let e = bad.join().expect("thread").expect_err("INCR of text");
    assert!(
        !e.is_connection(),
        "a reply's error, not the connection's: {e}"
    );
    assert!(e.to_string().contains("not an integer"), "{e}");
    assert_eq!(counts(&watch).flights, 2, "the three went out together");
    assert_eq!(llen(&mut check, &r.key("queue:default")), 2);
}

#[test]
fn a_connection_killed_mid_flight_fails_its_calls_and_sends_nothing_twice() {
    let r = TestRedis::start_tcp();
    let mut check = r.conn();
    let redis = r.redis();
    let watch = SyncConn::combined(&redis);
    let held = hold_a_flight(&r, &redis, &mut check, "gate");

    // Each call: a job onto a list, then a BLMOVE that blocks the flight for good.
    const CALLS: usize = 5;
    let callers: Vec<_> = (0..CALLS)
        .map(|n| {
            let (redis, list, stuck) = (redis.clone(), r.key("list"), r.key("never"));
            thread::spawn(move || {
                let mut conn = SyncConn::combined(&redis);
                let mut pipe = redis::pipe();
                pipe.cmd("LPUSH").arg(&list).arg(n).ignore();
                (pipe.cmd("BLMOVE").arg(&stuck).arg(&stuck))
                    .arg("LEFT")
                    .arg("RIGHT")
                    .arg(0)
                    .ignore();
                conn.pipe::<()>(&pipe)
            })
        })
        .collect();
    wait_for("every call to queue", || counts(&watch).queued == CALLS);
    open_gate(&r, &mut check, "gate");
    held.join().expect("holding thread");
    wait_for("the second flight to block", || {
        counts(&watch).flights == 2 && blocked_clients(&mut check) == 1
    });
    let killed: i64 = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("TYPE")
        .arg("normal")
        .arg("SKIPME")
        .arg("yes")
        .query(&mut check)
        .expect("CLIENT KILL");
    assert_eq!(killed, 1, "the shared connection");

    for c in callers {
        let e = c.join().expect("caller").expect_err("killed mid-flight");
        assert!(e.is_connection(), "a connection error: {e}");
    }
    // The first call's LPUSH ran before its BLMOVE blocked; the rest never ran, and none was resent.
    assert_eq!(llen(&mut check, &r.key("list")), 1);
    assert_eq!(counts(&watch).flights, 2, "nothing sent again");

    // The next call dials again.
    let mut conn = SyncConn::combined(&redis);
    client::push_sync(&mut conn, "default", &[job("default", 9)]).expect("after a redial");
    assert_eq!(llen(&mut check, &r.key("queue:default")), 1);
}

#[test]
fn a_lone_thread_over_a_unix_socket_leads_each_call_itself() {
    let r = TestRedis::start();
    let mut check = r.conn();
    let redis = r.redis();
    let watch = SyncConn::combined(&redis);
    let mut conn = SyncConn::combined(&redis);
    for n in 0..20 {
        client::push_sync(&mut conn, "default", &[job("default", n)]).expect("pushed");
    }
    assert_eq!(llen(&mut check, &r.key("queue:default")), 20);
    let c = counts(&watch);
    assert_eq!((c.calls, c.flights, c.queued), (20, 20, 0));
}
