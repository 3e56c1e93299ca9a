//! Shared helpers for the integration tests: a private `redis-server` per test, and small synchronous
//! readers for inspecting what the engine wrote.
//!
//! Each test binary uses a different subset of these helpers.
#![allow(dead_code)]

pub mod servers;

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use queue_core::server::ServerConfig;
use queue_core::{Redis, RedisConfig};

const REDIS_SERVER: &str = "/usr/bin/redis-server";
/// Upper bound on waiting for an event (the server answering, a client blocking, ...). Generous,
/// because it only matters when something is broken.
pub const EVENT_TIMEOUT: Duration = Duration::from_secs(10);
const POLL_EVERY: Duration = Duration::from_millis(5);

/// A `redis-server` owned by one test: no TCP port, a unix socket in a temporary directory (or, from
/// [`TestRedis::start_tcp`], a free port on 127.0.0.1), no persistence. Killed (by pid) and its
/// directory removed when dropped.
pub struct TestRedis {
    child: Child,
    socket: PathBuf,
    /// The TCP port, when the server listens on one instead of the socket.
    port: Option<u16>,
    namespace: String,
    // Removed after Drop has killed the server.
    _dir: tempfile::TempDir,
}

impl TestRedis {
    /// A server whose engine handle uses no namespace.
    pub fn start() -> TestRedis {
        TestRedis::with_namespace("")
    }

    /// A server whose engine handle prefixes every key with `namespace`.
    pub fn with_namespace(namespace: &str) -> TestRedis {
        TestRedis::listening(namespace, None)
    }

    /// A server on a TCP port of 127.0.0.1 (free when asked for), no namespace.
    pub fn start_tcp() -> TestRedis {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        TestRedis::listening("", Some(port))
    }

    fn listening(namespace: &str, port: Option<u16>) -> TestRedis {
        let dir = tempfile::Builder::new()
            .prefix("qc-redis-")
            .tempdir()
            .expect("create a temporary directory");
        let socket = dir.path().join("redis.sock");
        let child = Command::new(REDIS_SERVER)
            .arg("--port")
            .arg(port.unwrap_or(0).to_string())
            .args(["--bind", "127.0.0.1"])
            .arg("--unixsocket")
            .arg(&socket)
            .arg("--unixsocketperm")
            .arg("700")
            .arg("--save")
            .arg("")
            .arg("--appendonly")
            .arg("no")
            .arg("--dir")
            .arg(dir.path())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start redis-server");
        let mut server = TestRedis {
            child,
            socket,
            port,
            namespace: namespace.to_owned(),
            _dir: dir,
        };
        server.wait_until_ready();
        server
    }

    fn wait_until_ready(&mut self) {
        let deadline = Instant::now() + EVENT_TIMEOUT;
        loop {
            if let Some(status) = self.child.try_wait().expect("poll redis-server") {
                panic!("redis-server exited before it answered: {status}");
            }
            if (self.port.is_some() || self.socket.exists()) && self.ping() {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "redis-server did not answer PING on {} within {EVENT_TIMEOUT:?}",
                self.socket.display()
            );
            std::thread::sleep(POLL_EVERY);
        }
    }

    fn ping(&self) -> bool {
        let Ok(client) = redis::Client::open(self.url().as_str()) else {
            return false;
        };
        client
            .get_connection()
            .and_then(|mut c| redis::cmd("PING").query::<String>(&mut c))
            .is_ok_and(|reply| reply == "PONG")
    }

    pub fn url(&self) -> String {
        match self.port {
            Some(port) => format!("redis://127.0.0.1:{port}"),
            None => format!("unix://{}", self.socket.display()),
        }
    }

    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// The engine's handle on this server.
    pub fn redis(&self) -> Redis {
        Redis::new(RedisConfig::new(&self.url(), &self.namespace)).expect("valid Redis URL")
    }

    /// A plain synchronous connection for inspecting state. Keys passed to it are used verbatim.
    pub fn conn(&self) -> redis::Connection {
        redis::Client::open(self.url().as_str())
            .expect("valid Redis URL")
            .get_connection()
            .expect("connect to the test redis-server")
    }

    /// `name` under this server's namespace.
    pub fn key(&self, name: &str) -> String {
        format!("{}{}", self.namespace, name)
    }
}

impl Drop for TestRedis {
    fn drop(&mut self) {
        // Child::kill sends SIGKILL to this child's pid only.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A server configuration with the defaults the tests share: weighted order (a test of strict order
/// sets `strict`).
pub fn server_config(identity: &str, queues: &[(&str, u32)]) -> ServerConfig {
    ServerConfig {
        identity: identity.to_owned(),
        queues: queues.iter().map(|(q, w)| ((*q).to_owned(), *w)).collect(),
        strict: false,
        concurrency: 2,
        max_batch: 10,
        info_json: "{}".to_owned(),
        scheduler: false,
        gitlab_fetch_scan: None,
        sidekiq_metrics: None,
        capsules: Vec::new(),
        malloc_arena_max: None,
        malloc_trim_interval: None,
    }
}

/// Today's UTC date, as the daily stat keys spell it.
pub fn today() -> String {
    queue_core::clock::utc_date()
}

/// Polls `check` until it holds, panicking with `what` after [`EVENT_TIMEOUT`]. For waiting on an
/// event that only Redis can show (a client blocking, a key appearing), never as a stand-in for one
/// the test can receive directly.
pub fn wait_for(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + EVENT_TIMEOUT;
    while !check() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(POLL_EVERY);
    }
}

/// Opens batch `bid` (no callbacks, ten minutes to live), pushes `jobs` onto `work` in it and
/// closes it.
pub fn pushed_batch(sync: &mut queue_core::link::blocking::SyncConn, bid: &str, jobs: &[Vec<u8>]) {
    use queue_core::batch::{push, store};
    let new = store::NewBatch {
        callback_queue: "default".into(),
        callbacks: "{}".into(),
        expires_in: 600,
        ..Default::default()
    };
    assert!(store::open(sync, bid, Some(&new), true).expect("open"));
    push::push_sync(sync, bid, "work", jobs).expect("push");
    assert!(store::close(sync, bid).expect("close"));
}

// ---- synchronous readers ----------------------------------------------------------------------

/// Calls of one command Redis counted, its scripts' inner calls included.
pub fn command_calls(c: &mut redis::Connection, command: &str) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(c)
        .expect("INFO");
    let prefix = format!("cmdstat_{command}:calls=");
    info.lines()
        .find_map(|l| l.strip_prefix(prefix.as_str()))
        .and_then(|rest| rest.split(',').next())
        .map_or(0, |n| n.parse().expect("a call count"))
}

pub fn lrange(c: &mut redis::Connection, key: &str) -> Vec<Vec<u8>> {
    redis::cmd("LRANGE")
        .arg(key)
        .arg(0)
        .arg(-1)
        .query(c)
        .expect("LRANGE")
}

/// A queue list in the order its jobs will run: Sidekiq pushes on the left and takes from the right.
pub fn queue_in_run_order(c: &mut redis::Connection, key: &str) -> Vec<Vec<u8>> {
    let mut jobs = lrange(c, key);
    jobs.reverse();
    jobs
}

pub fn llen(c: &mut redis::Connection, key: &str) -> i64 {
    redis::cmd("LLEN").arg(key).query(c).expect("LLEN")
}

pub fn exists(c: &mut redis::Connection, key: &str) -> bool {
    redis::cmd("EXISTS")
        .arg(key)
        .query::<i64>(c)
        .expect("EXISTS")
        == 1
}

/// Members of a sorted set with their scores, lowest score first.
pub fn zrange_scores(c: &mut redis::Connection, key: &str) -> Vec<(Vec<u8>, f64)> {
    redis::cmd("ZRANGE")
        .arg(key)
        .arg(0)
        .arg(-1)
        .arg("WITHSCORES")
        .query(c)
        .expect("ZRANGE")
}

pub fn zmembers(c: &mut redis::Connection, key: &str) -> Vec<Vec<u8>> {
    zrange_scores(c, key).into_iter().map(|(m, _)| m).collect()
}

pub fn smembers(c: &mut redis::Connection, key: &str) -> Vec<String> {
    let mut m: Vec<String> = redis::cmd("SMEMBERS").arg(key).query(c).expect("SMEMBERS");
    m.sort();
    m
}

pub fn hgetall(c: &mut redis::Connection, key: &str) -> Vec<(String, String)> {
    let mut h: Vec<(String, String)> = redis::cmd("HGETALL").arg(key).query(c).expect("HGETALL");
    h.sort();
    h
}

pub fn hget(c: &mut redis::Connection, key: &str, field: &str) -> Option<String> {
    redis::cmd("HGET")
        .arg(key)
        .arg(field)
        .query(c)
        .expect("HGET")
}

/// An integer string key (a counter), 0 when absent.
pub fn counter(c: &mut redis::Connection, key: &str) -> i64 {
    redis::cmd("GET")
        .arg(key)
        .query::<Option<i64>>(c)
        .expect("GET")
        .unwrap_or(0)
}

/// Seconds until `key` expires: -1 when it never does, -2 when it does not exist.
pub fn ttl(c: &mut redis::Connection, key: &str) -> i64 {
    redis::cmd("TTL").arg(key).query(c).expect("TTL")
}

/// Sidekiq keeps the running totals forever and each daily counter for five years.
pub fn assert_stat_expiry(c: &mut redis::Connection, total: &str, daily: &str) {
    assert_eq!(ttl(c, total), -1, "{total} must never expire");
    let daily_ttl = ttl(c, daily);
    assert!(
        (1..=queue_core::keys::STATS_TTL_SECS).contains(&daily_ttl),
        "{daily} expires in {daily_ttl} s"
    );
}

pub fn all_keys(c: &mut redis::Connection) -> Vec<String> {
    let mut k: Vec<String> = redis::cmd("KEYS").arg("*").query(c).expect("KEYS");
    k.sort();
    k
}

/// How many clients the server has blocked in `BLMOVE` (idle waiters).
pub fn blocked_clients(c: &mut redis::Connection) -> i64 {
    // Clients blocked in BLMOVE: the idle waiters (other blocking commands are not counted).
    let list: String = redis::cmd("CLIENT")
        .arg("LIST")
        .query(c)
        .expect("CLIENT LIST");
    list.lines()
        .filter(|line| {
            let field = |name: &str| {
                line.split(' ')
                    .find_map(|f| f.strip_prefix(name))
                    .unwrap_or("")
            };
            field("flags=").contains('b') && field("cmd=") == "blmove"
        })
        .count() as i64
}

/// A job as a Sidekiq client would serialize it: `n` distinguishes jobs and is their only argument.
pub fn job(queue: &str, n: usize) -> Vec<u8> {
    format!(
        r#"{{"class":"HardWorker","args":[{n}],"retry":true,"queue":"{queue}","jid":"{n:024x}","created_at":1700000000.5,"enqueued_at":1700000000.5}}"#
    )
    .into_bytes()
}

/// Readable text for assertion messages about raw job bytes.
pub fn text(raw: &[u8]) -> String {
    String::from_utf8_lossy(raw).into_owned()
}

/// Runs one quick job through `fetcher`, so it has timed `queue`'s jobs and sizes its batches from
/// them (an untimed queue is fetched one job at a time). Counts as one processed job.
pub fn warm_up(redis: &Redis, fetcher: &mut queue_core::fetch::Fetcher, queue: &str) {
    let warm = job(queue, 0);
    let mut bc = queue_core::link::blocking::BlockingConn::new(redis).expect("blocking connection");
    bc.run(async |c| queue_core::client::push(c, queue, std::slice::from_ref(&warm)).await)
        .expect("push");
    let got = fetcher
        .next(Duration::from_secs(5))
        .expect("fetch")
        .expect("the warm-up job");
    assert_eq!(got, (queue.to_owned(), warm));
    fetcher.done();
}
