//! Over TCP: Nagle's algorithm is off on every connection, and a fetcher's unreplied writes wait in
//! the kernel for the connection's next round trip (`link::tcp_socket`) — Redis reads them in one
//! event — and still reach Redis when the process is killed. Against a real Redis on a free local
//! port.

mod support;

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::os::fd::{BorrowedFd, RawFd};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use queue_core::link::blocking::{BlockingConn, Due, SyncConn};

use support::*;

/// Set in the child process of `held_writes_reach_redis_when_the_process_is_killed`.
const CHILD_URL: &str = "QUEUE_TCP_TEST_CHILD_URL";
const HELD: usize = 50;

fn rpush(key: &str, value: &str) -> Vec<u8> {
    redis::cmd("RPUSH").arg(key).arg(value).get_packed_command()
}

/// This process's sockets connected to `port` on 127.0.0.1.
fn sockets_to(port: u16) -> Vec<RawFd> {
    let redis: SocketAddr = ([127, 0, 0, 1], port).into();
    std::fs::read_dir("/proc/self/fd")
        .expect("/proc/self/fd")
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<RawFd>().ok())
        .filter(|&fd| {
            // SAFETY: only reads the socket's peer; a descriptor closed meanwhile answers EBADF.
            let fd = unsafe { BorrowedFd::borrow_raw(fd) };
            let peer = socket2::SockRef::from(&fd).peer_addr();
            peer.ok().and_then(|a| a.as_socket()) == Some(redis)
        })
        .collect()
}

fn nodelay(fd: RawFd) -> bool {
    // SAFETY: the test owns the connections behind these descriptors until it returns.
    let fd = unsafe { BorrowedFd::borrow_raw(fd) };
    socket2::SockRef::from(&fd)
        .tcp_nodelay()
        .expect("TCP_NODELAY")
}

fn reads_processed(c: &mut redis::Connection) -> u64 {
    let info: String = redis::cmd("INFO").arg("stats").query(c).expect("INFO");
    info.lines()
        .find_map(|l| l.strip_prefix("total_reads_processed:"))
        .map(|n| n.trim().parse().expect("a count"))
        .expect("total_reads_processed")
}

#[test]
fn every_connection_of_the_engine_has_nagle_off() {
    let r = TestRedis::start_tcp();
    let port = r.url().rsplit(':').next().and_then(|p| p.parse().ok());
    let port: u16 = port.expect("a port");
    let mut sync = SyncConn::new(&r.redis());
    let _: String = sync.cmd(&redis::cmd("PING")).expect("PING");
    let mut blocking = BlockingConn::new(&r.redis()).expect("runtime");
    let _: String = blocking
        .run(async |c| c.cmd(&redis::cmd("PING")).await)
        .expect("PING");

    let sockets = sockets_to(port);
    assert_eq!(sockets.len(), 2, "the two connections: {sockets:?}");
    for fd in sockets {
        // With Nagle on, a call written right after an unreplied write waits for the delayed ACK
        // of the first (~40 ms): blank jobs over TCP ran at 4,500 a second.
        assert!(nodelay(fd), "fd {fd} has Nagle's algorithm on");
    }
}

/// Redis's read events while `conn` writes 20 unreplied pushes a job's time apart and then makes a
/// call; checks that all 20 ran, in order, before the call.
fn reads_for_twenty_writes(r: &TestRedis, mut conn: SyncConn) -> u64 {
    let mut check = r.conn();
    let key = r.key("list");
    let _: String = conn.cmd(&redis::cmd("PING")).expect("PING");

    let before = reads_processed(&mut check);
    for i in 0..20 {
        conn.send_unreplied(&rpush(&key, &i.to_string()), Due::WithNextCall)
            .expect("write");
        // A job's run between two acks: long enough for Redis to wake between writes sent one by
        // one, far below the ~200 ms after which the kernel sends held bytes anyway.
        std::thread::sleep(Duration::from_millis(1));
    }
    let len: i64 = conn.cmd(redis::cmd("LLEN").arg(&key)).expect("LLEN");
    assert_eq!(len, 20, "every write ran, in order, before the call");
    let reads = reads_processed(&mut check) - before;
    let values: Vec<String> = lrange(&mut check, &key)
        .into_iter()
        .map(|v| String::from_utf8(v).expect("utf-8"))
        .collect();
    assert_eq!(values, (0..20).map(|i| i.to_string()).collect::<Vec<_>>());
    reads
}

#[test]
fn unreplied_writes_wait_for_the_next_call_and_redis_reads_them_in_one_go() {
    let r = TestRedis::start_tcp();
    let reads = reads_for_twenty_writes(&r, SyncConn::holding(&r.redis()));
    // The INFO call itself is one read; the writes and the call came in one segment.
    assert!(
        reads <= 4,
        "Redis read {reads} times for 20 held writes and a call"
    );
}

#[test]
fn a_connection_not_made_to_hold_sends_each_write_at_once() {
    // The client's push connections: nothing they write waits.
    let r = TestRedis::start_tcp();
    let reads = reads_for_twenty_writes(&r, SyncConn::new(&r.redis()));
    assert!(
        reads >= 15,
        "Redis read {reads} times for 20 writes sent one by one"
    );
}

#[test]
fn a_write_due_now_goes_out_at_once_with_what_was_held_before_it() {
    let r = TestRedis::start_tcp();
    let mut check = r.conn();
    let key = r.key("list");
    let mut conn = SyncConn::holding(&r.redis());
    let _: String = conn.cmd(&redis::cmd("PING")).expect("PING");

    let sent = Instant::now();
    conn.send_unreplied(&rpush(&key, "ack"), Due::WithNextCall)
        .expect("write");
    conn.send_unreplied(&rpush(&key, "release"), Due::Now)
        .expect("write");
    wait_for("both writes", || llen(&mut check, &key) == 2);
    // Held, they would arrive after the kernel's ~200 ms; sent, within a millisecond or so.
    let took = sent.elapsed();
    assert!(took < Duration::from_millis(100), "took {took:?}");
    let values: Vec<Vec<u8>> = lrange(&mut check, &key);
    assert_eq!(values, [b"ack".to_vec(), b"release".to_vec()]);
}

#[test]
fn held_writes_reach_redis_when_the_process_is_killed() {
    let r = TestRedis::start_tcp();
    let mut check = r.conn();
    let key = r.key("list");
    let mut child = Command::new(std::env::current_exe().expect("this test binary"))
        .args(["--exact", "child_holds_writes_until_killed", "--nocapture"])
        .env(CHILD_URL, r.url())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the child");
    let stdout = child.stdout.take().expect("the child's stdout");
    let said_held = BufReader::new(stdout)
        .lines()
        .map_while(|l| l.ok())
        .any(|l| l == "held");
    assert!(said_held, "the child ended before its writes");

    child.kill().expect("SIGKILL the child");
    child.wait().expect("reap the child");
    // The killed process's socket is closed by the kernel, which sends what it held first.
    wait_for("the killed child's held writes", || {
        llen(&mut check, &key) == HELD as i64
    });
}

/// The child of `held_writes_reach_redis_when_the_process_is_killed`: writes `HELD` unreplied
/// pushes, says "held", and waits to be killed. A no-op when run as a test of its own.
#[test]
fn child_holds_writes_until_killed() {
    let Ok(url) = std::env::var(CHILD_URL) else {
        return;
    };
    let redis = queue_core::Redis::new(queue_core::RedisConfig::new(&url, "")).expect("URL");
    let mut conn = SyncConn::holding(&redis);
    let _: String = conn.cmd(&redis::cmd("PING")).expect("PING");
    for i in 0..HELD {
        conn.send_unreplied(&rpush("list", &i.to_string()), Due::WithNextCall)
            .expect("write");
    }
    println!("held");
    std::thread::sleep(EVENT_TIMEOUT);
}
