//! A fetch whose reply never arrives: Redis ran the script (the batch moved into the fetcher's working
//! list) but the connection broke before the answer came back, as when Redis shuts down mid-call. The
//! batch must not stay in the working list, unseen, for as long as the process lives.

mod support;

use std::io::{Read, Write};
use std::net::Shutdown;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use queue_core::client;
use queue_core::link::blocking::BlockingConn;
use queue_core::server::Server;
use queue_core::{Redis, RedisConfig};

use support::*;

const IDENTITY: &str = "host:123:abcdefabcdef";
const WAIT: Duration = Duration::from_secs(5);

/// A unix-socket relay in front of the test Redis. Once armed, it passes the next fetch call (an
/// `EVALSHA` naming a queue) on to Redis, swallows Redis's answer, and closes that connection.
struct DropOneReply {
    socket: PathBuf,
    armed: Arc<AtomicBool>,
    _dir: tempfile::TempDir,
}

impl DropOneReply {
    fn start(upstream: &Path) -> DropOneReply {
        let dir = tempfile::Builder::new()
            .prefix("qc-relay-")
            .tempdir()
            .expect("create a temporary directory");
        let socket = dir.path().join("relay.sock");
        let listener = UnixListener::bind(&socket).expect("bind the relay socket");
        let armed = Arc::new(AtomicBool::new(false));
        let upstream = upstream.to_owned();
        let trigger = armed.clone();
        // Ends with the test process; each connection's threads end when either side closes.
        std::thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { return };
                let Ok(server) = UnixStream::connect(&upstream) else {
                    continue;
                };
                relay(client, server, trigger.clone());
            }
        });
        DropOneReply {
            socket,
            armed,
            _dir: dir,
        }
    }

    fn arm(&self) {
        self.armed.store(true, Ordering::SeqCst);
    }

    fn redis(&self) -> Redis {
        let url = format!("unix://{}", self.socket.display());
        Redis::new(RedisConfig::new(&url, "")).expect("valid Redis URL")
    }
}

fn relay(client: UnixStream, server: UnixStream, armed: Arc<AtomicBool>) {
    let drop_reply = Arc::new(AtomicBool::new(false));
    let (mut from_client, mut to_server) = (
        client.try_clone().expect("clone"),
        server.try_clone().expect("clone"),
    );
    let dropping = drop_reply.clone();
    std::thread::spawn(move || {
        let mut buf = [0u8; 16384];
        while let Ok(n) = from_client.read(&mut buf) {
            let chunk = &buf[..n];
            if n == 0 {
                break;
            }
            if contains(chunk, b"EVALSHA")
                && contains(chunk, b"queue:")
                && armed.swap(false, Ordering::SeqCst)
            {
                dropping.store(true, Ordering::SeqCst);
            }
            if to_server.write_all(chunk).is_err() {
                break;
            }
        }
    });
    let (mut from_server, mut to_client) = (server, client);
    std::thread::spawn(move || {
        let mut buf = [0u8; 16384];
        while let Ok(n) = from_server.read(&mut buf) {
            if n == 0 {
                break;
            }
            if drop_reply.load(Ordering::SeqCst) {
                let _ = to_client.shutdown(Shutdown::Both);
                let _ = from_server.shutdown(Shutdown::Both);
                return;
            }
            if to_client.write_all(&buf[..n]).is_err() {
                break;
            }
        }
    });
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

fn push(redis: &Redis, queue: &str, jobs: &[Vec<u8>]) {
    let mut bc = BlockingConn::new(redis).expect("blocking connection");
    bc.run(async |c| client::push(c, queue, jobs).await)
        .expect("push");
}

#[test]
fn a_batch_whose_reply_was_lost_is_taken_by_the_next_fetch_and_nothing_is_left_behind() {
    let t = TestRedis::start();
    let mut c = t.conn();
    let socket = t.url().trim_start_matches("unix://").to_owned();
    let relay = DropOneReply::start(Path::new(&socket));
    let redis = relay.redis();
    // The script is in Redis's cache already, so the call whose reply is lost is the one that runs it.
    let _: String = redis::cmd("SCRIPT")
        .arg("LOAD")
        .arg(include_str!("../src/scripts/fetch.lua"))
        .query(&mut c)
        .expect("SCRIPT LOAD");
    let mut config = server_config(IDENTITY, &[("default", 1)]);
    config.concurrency = 1;
    config.max_batch = 2;
    let server = Server::start(redis.clone(), config).expect("server starts");
    let mut fetcher = server.fetcher("t1").expect("fetcher");
    let working = redis.keys().working("default", IDENTITY, "t1");

    warm_up(&redis, &mut fetcher, "default");
    let jobs: Vec<Vec<u8>> = (1..=3).map(|n| job("default", n)).collect();
    push(&t.redis(), "default", &jobs);

    relay.arm();
    let lost = fetcher.next(WAIT);
    assert!(lost.is_err(), "the fetch should fail, got {lost:?}");
    // Redis ran it: two jobs moved into the working list, and the fetcher never saw them.
    assert_eq!(
        queue_in_run_order(&mut c, "queue:default"),
        vec![jobs[2].clone()]
    );
    assert_eq!(llen(&mut c, &working), 2);

    // The next call takes that batch first, in order, then the queue's last job.
    for expected in &jobs {
        let (queue, raw) = fetcher
            .next(WAIT)
            .expect("fetch")
            .expect("a job should have been fetched");
        assert_eq!(queue, "default");
        assert_eq!(text(&raw), text(expected));
        fetcher.done();
    }
    fetcher.close().expect("close");
    assert_eq!(
        server.stop().expect("stop"),
        0,
        "nothing was left to put back"
    );

    assert_eq!(llen(&mut c, "queue:default"), 0);
    assert_eq!(llen(&mut c, &working), 0);
    assert_eq!(counter(&mut c, "stat:processed"), 4);
    assert!(!exists(&mut c, &format!("jq:fetched:{IDENTITY}")));
}
