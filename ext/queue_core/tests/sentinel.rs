//! Redis Sentinel against real processes: a `redis-server` primary, a replica (`replicaof`) and three
//! `redis-sentinel`s on private loopback ports. The engine finds the master through the sentinels,
//! moves to the new one after `SENTINEL FAILOVER`, names every sentinel it tried when none gives a
//! master, and drops a connection that gets `READONLY` (a demoted master) to dial again.

mod support;

use std::process::{Command, Stdio};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use queue_core::client;
use queue_core::link::blocking::{BlockingConn, Due, SyncConn};
use queue_core::link::sentinel::{SentinelAddr, SentinelConfig};
use queue_core::{ConnectErrorKind, Error, Redis, RedisConfig};

use support::servers::{free_port, redis_server, Process};
use support::{job, llen};

const REDIS_SENTINEL: &str = "/usr/bin/redis-sentinel";
const MASTER: &str = "mymaster";
/// Generous: a failover here takes a few seconds, and this only matters when something is broken.
const FAILOVER_BOUND: Duration = Duration::from_secs(30);
/// How soon after the promotion connections reach the new master: well under the ~10 s the sentinels
/// take to demote a running old master, which is when they would otherwise be dropped.
const WATCHED_BOUND: Duration = Duration::from_secs(5);

/// Tests run one at a time: a port one test found free must not be taken by another's server.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    SERIAL
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn conn(port: u16) -> redis::Connection {
    redis::Client::open(format!("redis://127.0.0.1:{port}"))
        .expect("a URL")
        .get_connection_with_timeout(Duration::from_secs(2))
        .expect("connect")
}

fn try_conn(port: u16) -> Option<redis::Connection> {
    redis::Client::open(format!("redis://127.0.0.1:{port}"))
        .ok()?
        .get_connection_with_timeout(Duration::from_secs(2))
        .ok()
}

fn role(port: u16) -> Option<String> {
    let mut c = try_conn(port)?;
    let reply: Vec<redis::Value> = redis::cmd("ROLE").query(&mut c).ok()?;
    match reply.first() {
        Some(redis::Value::BulkString(r)) => Some(String::from_utf8_lossy(r).into_owned()),
        _ => None,
    }
}

fn wait_for(what: &str, bound: Duration, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + bound;
    while !check() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A primary, its replica and three sentinels that monitor it as `mymaster`.
struct SentinelSet {
    ports: [u16; 2],
    sentinel_ports: Vec<u16>,
    _processes: Vec<Process>,
    _dir: tempfile::TempDir,
}

impl SentinelSet {
    fn start() -> SentinelSet {
        let dir = tempfile::Builder::new()
            .prefix("qc-sentinel-")
            .tempdir()
            .expect("create a temporary directory");
        let (primary, replica) = (free_port(), free_port());
        let mut processes = vec![redis_server(dir.path(), "primary", primary, &[])];
        wait_for("the primary", FAILOVER_BOUND, || role(primary).is_some());
        processes.push(redis_server(
            dir.path(),
            "replica",
            replica,
            &["--replicaof".to_owned(), format!("127.0.0.1 {primary}")],
        ));
        wait_for("the replica in sync", FAILOVER_BOUND, || {
            try_conn(replica)
                .and_then(|mut c| {
                    redis::cmd("INFO")
                        .arg("replication")
                        .query::<String>(&mut c)
                        .ok()
                })
                .is_some_and(|info| info.contains("master_link_status:up"))
        });
        let sentinel_ports: Vec<u16> = (0..3).map(|_| free_port()).collect();
        for (i, port) in sentinel_ports.iter().enumerate() {
            let conf = dir.path().join(format!("sentinel-{i}.conf"));
            // Sentinel rewrites its configuration file: it must be writable.
            std::fs::write(
                &conf,
                format!(
                    "port {port}\nbind 127.0.0.1\ndaemonize no\ndir {}\n\
                     sentinel monitor {MASTER} 127.0.0.1 {primary} 2\n\
                     sentinel down-after-milliseconds {MASTER} 1000\n\
                     sentinel failover-timeout {MASTER} 5000\n",
                    dir.path().display()
                ),
            )
            .expect("write a sentinel configuration");
            let child = Command::new(REDIS_SENTINEL)
                .arg(&conf)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("start redis-sentinel");
            processes.push(Process(child));
        }
        let set = SentinelSet {
            ports: [primary, replica],
            sentinel_ports,
            _processes: processes,
            _dir: dir,
        };
        for port in &set.sentinel_ports {
            wait_for("each sentinel to see the replica", FAILOVER_BOUND, || {
                try_conn(*port)
                    .and_then(|mut c| {
                        redis::cmd("SENTINEL")
                            .arg("replicas")
                            .arg(MASTER)
                            .query::<Vec<redis::Value>>(&mut c)
                            .ok()
                    })
                    .is_some_and(|replicas| !replicas.is_empty())
            });
        }
        set
    }

    fn addrs(&self) -> Vec<SentinelAddr> {
        self.sentinel_ports
            .iter()
            .map(|port| SentinelAddr {
                host: "127.0.0.1".to_owned(),
                port: *port,
            })
            .collect()
    }

    /// The engine's handle: the URL's host is the master's name, as users write it.
    fn redis(&self) -> Redis {
        let config = RedisConfig::new(&format!("redis://{MASTER}/0"), "")
            .with_sentinel(SentinelConfig::new(MASTER, self.addrs()));
        Redis::new(config).expect("a valid configuration")
    }

    /// Starts a failover from the first sentinel (retried while the sentinels have not yet judged
    /// the replica fit to promote), and returns the old and new master's ports once the replica
    /// answers `ROLE` as master.
    fn failover(&self) -> (u16, u16, Instant) {
        let [old, new] = self.ports;
        let mut sentinel = conn(self.sentinel_ports[0]);
        wait_for("SENTINEL FAILOVER to start", FAILOVER_BOUND, || {
            redis::cmd("SENTINEL")
                .arg("FAILOVER")
                .arg(MASTER)
                .query::<String>(&mut sentinel)
                .is_ok()
        });
        wait_for("the replica promoted", FAILOVER_BOUND, || {
            role(new).as_deref() == Some("master")
        });
        (old, new, Instant::now())
    }
}

#[test]
fn pushes_and_reads_through_the_sentinels() {
    let _serial = serial();
    let set = SentinelSet::start();
    let redis = set.redis();
    let mut sync = SyncConn::new(&redis);
    client::push_sync(&mut sync, "default", &[job("default", 1)]).expect("a synchronous push");
    let mut bc = BlockingConn::new(&redis).expect("a blocking connection");
    bc.run(async |c| client::push(c, "default", &[job("default", 2)]).await)
        .expect("an async push");
    assert_eq!(llen(&mut conn(set.ports[0]), "queue:default"), 2);
}

#[test]
fn after_a_failover_every_connection_reaches_the_new_master() {
    let _serial = serial();
    let set = SentinelSet::start();
    let redis = set.redis();
    let mut sync = SyncConn::new(&redis);
    let mut bc = BlockingConn::new(&redis).expect("a blocking connection");
    client::push_sync(&mut sync, "default", &[job("default", 1)]).expect("a push before");
    bc.run(async |c| client::push(c, "default", &[job("default", 2)]).await)
        .expect("an async push before");
    // A fetcher's kind of connection, whose acks are written without replies: one is written, and
    // not yet confirmed by a call, when the master moves.
    let mut acks = SyncConn::holding(&redis);
    let ack = redis::cmd("INCR").arg("acked").get_packed_command();
    acks.send_dialling(&ack).expect("an ack before");

    let (old, new, promoted) = set.failover();

    // The connections were made to the old master. The sentinels reconfigure it as a replica (and
    // close its clients) ~10 s after the promotion; until then it still takes writes, which its
    // resync discards. The engine's watcher hears `+switch-master` at once, and every connection
    // dials the new master before its next call. A call may fail meanwhile as a connection error
    // (dropped; the next call asks the sentinels again).
    let mut n = 10;
    let on_new = |queue: &str| llen(&mut conn(new), &format!("queue:{queue}")) > 0;
    wait_for("pushes on the new master", FAILOVER_BOUND, || {
        n += 1;
        if !on_new("after-sync") {
            if let Err(e) = client::push_sync(&mut sync, "after-sync", &[job("after-sync", n)]) {
                assert!(e.is_connection(), "not a connection error: {e}");
            }
        }
        if !on_new("after-async") {
            let pushed =
                bc.run(async |c| client::push(c, "after-async", &[job("after-async", n)]).await);
            if let Err(e) = pushed {
                assert!(e.is_connection(), "not a connection error: {e}");
            }
        }
        on_new("after-sync") && on_new("after-async")
    });
    let seconds = promoted.elapsed().as_secs_f64();
    eprintln!("both connections pushed to the new master {seconds:.2} s after the promotion");
    assert!(
        seconds < WATCHED_BOUND.as_secs_f64(),
        "{seconds:.2} s: the connections waited for the old master to drop them"
    );
    assert!(redis.generation() > 0, "the watcher heard +switch-master");

    // That ack is unconfirmed: the next call on its connection fails as a connection error instead
    // of confirming it (Redis might have it on the old master only), so the fetcher writes it again
    // (acks may be applied twice), on the new master; a write meanwhile is kept for later.
    assert!(
        acks.send_unreplied(&ack, Due::Now).is_err(),
        "no write on a connection to the old master"
    );
    let e = acks
        .cmd::<String>(&redis::cmd("PING"))
        .expect_err("the ack is unconfirmed");
    assert!(e.is_connection(), "{e}");
    acks.send_dialling(&ack).expect("written again");
    let _: String = acks
        .cmd(&redis::cmd("PING"))
        .expect("PING on the new master");
    let acked: Option<i64> = redis::cmd("GET")
        .arg("acked")
        .query(&mut conn(new))
        .expect("GET");
    // 1 when the first write had not replicated before the promotion, 2 when it had.
    assert!(matches!(acked, Some(1 | 2)), "{acked:?}");

    wait_for("the old master demoted", FAILOVER_BOUND, || {
        role(old).as_deref() == Some("slave")
    });
    // From now on every push lands on the new master at once.
    client::push_sync(&mut sync, "later", &[job("later", 1)]).expect("a push after");
    bc.run(async |c| client::push(c, "later", &[job("later", 2)]).await)
        .expect("an async push after");
    assert_eq!(llen(&mut conn(new), "queue:later"), 2);
}

#[test]
fn a_connection_that_gets_readonly_dials_again() {
    let _serial = serial();
    // No sentinels: a demoted master without anyone closing its clients, the case where only the
    // READONLY reply says so.
    let dir = tempfile::tempdir().expect("a temporary directory");
    let (a, b) = (free_port(), free_port());
    let _a = redis_server(dir.path(), "a", a, &[]);
    let _b = redis_server(dir.path(), "b", b, &[]);
    wait_for("both servers", FAILOVER_BOUND, || {
        role(a).is_some() && role(b).is_some()
    });
    let redis = Redis::new(RedisConfig::new(&format!("redis://127.0.0.1:{a}"), "")).expect("a URL");
    let mut sync = SyncConn::new(&redis);
    let first: i64 = sync.cmd(redis::cmd("CLIENT").arg("ID")).expect("CLIENT ID");

    let _: String = redis::cmd("REPLICAOF")
        .arg("127.0.0.1")
        .arg(b)
        .query(&mut conn(a))
        .expect("REPLICAOF");
    let e = client::push_sync(&mut sync, "default", &[job("default", 1)])
        .expect_err("a push to a replica fails");
    assert!(
        e.is_connection(),
        "READONLY counts as a connection error: {e}"
    );
    assert!(e.to_string().contains("no longer the master"), "{e}");

    let _: String = redis::cmd("REPLICAOF")
        .arg("NO")
        .arg("ONE")
        .query(&mut conn(a))
        .expect("REPLICAOF NO ONE");
    let second: i64 = sync.cmd(redis::cmd("CLIENT").arg("ID")).expect("CLIENT ID");
    assert_ne!(first, second, "the connection was dialled again");
}

#[test]
fn no_master_names_every_sentinel_tried() {
    let _serial = serial();
    let set = SentinelSet::start();
    let closed = free_port();
    let mut addrs = set.addrs();
    addrs.truncate(1);
    addrs.push(SentinelAddr {
        host: "127.0.0.1".to_owned(),
        port: closed,
    });

    // A name the sentinels do not monitor, and a port where no sentinel listens.
    let config = RedisConfig::new("redis://nosuchmaster/0", "")
        .with_sentinel(SentinelConfig::new("nosuchmaster", addrs.clone()));
    let redis = Redis::new(config).expect("a valid configuration");
    let e = client::push_sync(&mut SyncConn::new(&redis), "q", &[job("q", 1)])
        .expect_err("no master to push to");
    let Error::Connect(connect) = &e else {
        panic!("not a connect error: {e:?}");
    };
    assert_eq!(connect.kind, ConnectErrorKind::NoMaster);
    let text = e.to_string();
    assert!(
        text.contains(&format!(
            "sentinel 127.0.0.1:{} knows no master named \"nosuchmaster\"",
            set.sentinel_ports[0]
        )),
        "{text}"
    );
    assert!(
        text.contains(&format!("sentinel 127.0.0.1:{closed} unreachable")),
        "{text}"
    );

    // The async dial says the same.
    let mut bc = BlockingConn::new(&redis).expect("a blocking connection");
    let e = bc
        .run(async |c| c.connect().await)
        .expect_err("no master to dial");
    assert!(
        e.to_string().contains("knows no master named"),
        "async: {e}"
    );

    // No sentinels at all is refused when configured.
    let config = RedisConfig::new("redis://mymaster/0", "")
        .with_sentinel(SentinelConfig::new(MASTER, vec![]));
    assert!(matches!(Redis::new(config), Err(Error::InvalidArgument(_))));
}
