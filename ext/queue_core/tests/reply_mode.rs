//! A synchronous connection's unreplied writes switch its replies off once; its next call switches
//! them on in the same write. Against a real Redis: every call still gets its own reply, unreplied
//! writes run in order before it, and Redis ran exactly the switches expected (`INFO commandstats`).

mod support;

use queue_core::link::blocking::{Due, SyncConn};
use redis::Script;

use support::*;

fn rpush(key: &str, value: &str) -> Vec<u8> {
    redis::cmd("RPUSH").arg(key).arg(value).get_packed_command()
}

/// A server with its stats reset, a connection to check it with, a list key, and the connection
/// under test (not dialled yet).
fn fresh() -> (TestRedis, redis::Connection, String, SyncConn) {
    let r = TestRedis::start();
    let mut check = r.conn();
    let key = r.key("list");
    let conn = SyncConn::new(&r.redis());
    redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .query::<()>(&mut check)
        .expect("reset");
    (r, check, key, conn)
}

#[test]
fn unreplied_writes_run_in_order_and_each_call_reads_its_own_reply() {
    let (_r, mut check, key, mut conn) = fresh();

    conn.send_dialling(&rpush(&key, "a")).expect("write");
    conn.send_unreplied(&rpush(&key, "b"), Due::WithNextCall)
        .expect("write");
    conn.send_unreplied(&rpush(&key, "c"), Due::WithNextCall)
        .expect("write");
    // Replies were off for all three: the first reply read here is LLEN's.
    let len: i64 = conn.cmd(redis::cmd("LLEN").arg(&key)).expect("LLEN");
    assert_eq!(len, 3);
    // On again: a plain call in between needs no switch.
    let first: String = conn
        .cmd(redis::cmd("LINDEX").arg(&key).arg(0))
        .expect("LINDEX");
    assert_eq!(first, "a");
    // One OFF and one ON for the three writes.
    assert_eq!(command_calls(&mut check, "client|reply"), 2);

    // A script the server does not have yet, right after unreplied writes: the NOSCRIPT answer and
    // the retry after loading are read as they come.
    conn.send_unreplied(&rpush(&key, "d"), Due::WithNextCall)
        .expect("write");
    let script = Script::new("return redis.call('LRANGE', KEYS[1], 0, -1)");
    let all: Vec<String> = conn.script(&script.key(&key)).expect("script");
    assert_eq!(all, ["a", "b", "c", "d"]);
    // A pipeline after unreplied writes.
    conn.send_unreplied(&rpush(&key, "e"), Due::WithNextCall)
        .expect("write");
    let (len, last): (i64, String) = conn
        .pipe(redis::pipe().llen(&key).lindex(&key, -1))
        .expect("pipeline");
    assert_eq!((len, last.as_str()), (5, "e"));
    assert_eq!(command_calls(&mut check, "client|reply"), 6);
    assert_eq!(lrange(&mut check, &key).len(), 5);
}

#[test]
fn a_new_connection_starts_with_replies_on() {
    let (_r, mut check, key, mut conn) = fresh();
    conn.send_dialling(&rpush(&key, "a")).expect("write");
    wait_for("the write to land", || llen(&mut check, &key) == 1);
    // The connection dies while its replies are off.
    let killed: i64 = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("TYPE")
        .arg("normal")
        .arg("SKIPME")
        .arg("yes")
        .query(&mut check)
        .expect("CLIENT KILL");
    assert_eq!(killed, 1);
    // The next call finds it broken; the one after dials a fresh connection, which answers
    // without being switched on.
    assert!(conn
        .cmd::<i64>(redis::cmd("LLEN").arg(&key))
        .expect_err("a killed connection")
        .is_connection());
    let len: i64 = conn.cmd(redis::cmd("LLEN").arg(&key)).expect("LLEN");
    assert_eq!(len, 1);
    conn.send_unreplied(&rpush(&key, "b"), Due::WithNextCall)
        .expect("write");
    let len: i64 = conn.cmd(redis::cmd("LLEN").arg(&key)).expect("LLEN");
    assert_eq!(len, 2);
    // OFF for "a", OFF and ON for "b": none for the fresh connection's first call.
    assert_eq!(command_calls(&mut check, "client|reply"), 3);
}
