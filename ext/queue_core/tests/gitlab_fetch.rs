//! gitlab-sidekiq-fetcher 0.8's stranded jobs against a real Redis: the working lists of a process
//! whose heartbeat expired go back to their queues, in order, by one script per list; a live
//! process's lists stay; keys outside the namespace are not touched; one server scans per interval.
//! The lists and heartbeats are written as the fetcher writes them (`ReliableFetch` takes a job with
//! `RPOPLPUSH queue:<name> working:queue:<name>:<identity>`, and beats
//! `SET reliable-fetcher-heartbeat-<identity with '-' for ':'> 1 EX 60`).

mod support;

use std::time::{Duration, Instant};

use queue_core::gitlab_fetch::{Recovery, TURN};
use queue_core::link::blocking::BlockingConn;
use queue_core::server::{Server, ServerConfig};

use support::*;

const DEAD: &str = "web-1:111:0a0a0a0a0a0a";
const LIVE: &str = "web-2:222:0b0b0b0b0b0b";
const LEGACY: &str = "web-3:333";

fn heartbeat(identity: &str) -> String {
    format!("reliable-fetcher-heartbeat-{}", identity.replace(':', "-"))
}

/// Pushes `jobs` onto `queue` (`key` under the namespace) as a client does, then has the fetcher of
/// `identity` take all of them, one `RPOPLPUSH` each. Returns the working list's key.
fn taken(
    t: &TestRedis,
    c: &mut redis::Connection,
    queue: &str,
    identity: &str,
    jobs: &[&str],
) -> String {
    let queue_key = t.key(&format!("queue:{queue}"));
    let working = t.key(&format!("working:queue:{queue}:{identity}"));
    for job in jobs {
        redis::cmd("LPUSH")
            .arg(&queue_key)
            .arg(*job)
            .exec(c)
            .expect("LPUSH");
    }
    for _ in jobs {
        redis::cmd("RPOPLPUSH")
            .arg(&queue_key)
            .arg(&working)
            .exec(c)
            .expect("RPOPLPUSH");
    }
    working
}

fn beat(t: &TestRedis, c: &mut redis::Connection, identity: &str) {
    redis::cmd("SET")
        .arg(t.key(&heartbeat(identity)))
        .arg(1)
        .arg("EX")
        .arg(60)
        .exec(c)
        .expect("SET");
}

fn turn(conn: &mut BlockingConn, recovery: &mut Recovery) -> usize {
    conn.run(async |c| recovery.turn(c).await)
        .expect("a recovery turn")
}

fn strings(c: &mut redis::Connection, key: &str) -> Vec<String> {
    queue_in_run_order(c, key)
        .into_iter()
        .map(|j| String::from_utf8(j).expect("UTF-8"))
        .collect()
}

fn dead_and_live_processes(namespace: &str) {
    let t = TestRedis::with_namespace(namespace);
    let mut c = t.conn();
    let queue = t.key("queue:default");
    let dead = taken(&t, &mut c, "default", DEAD, &["d1", "d2", "d3"]);
    let legacy = taken(&t, &mut c, "mail:high", LEGACY, &["m1"]);
    let live = taken(&t, &mut c, "default", LIVE, &["l1"]);
    redis::cmd("LPUSH")
        .arg(&queue)
        .arg("waiting")
        .exec(&mut c)
        .expect("LPUSH");
    beat(&t, &mut c, LIVE);
    // Another app's lists, outside this namespace (or, without one, under a namespace).
    let foreign = format!(
        "{}other:working:queue:default:{DEAD}",
        if namespace.is_empty() { "x:" } else { "" }
    );
    redis::cmd("LPUSH")
        .arg(&foreign)
        .arg("theirs")
        .exec(&mut c)
        .expect("LPUSH");

    let mut conn = BlockingConn::new(&t.redis()).expect("connection");
    let mut recovery = Recovery::new("ours:1:abc", Duration::from_secs(60));
    assert_eq!(turn(&mut conn, &mut recovery), 4);
    // Back on the right of their queues, in the order they were taken: they run next.
    assert_eq!(strings(&mut c, &queue), ["d1", "d2", "d3", "waiting"]);
    assert_eq!(strings(&mut c, &t.key("queue:mail:high")), ["m1"]);
    assert!(smembers(&mut c, &t.key("queues")).contains(&"mail:high".to_owned()));
    assert!(!exists(&mut c, &dead) && !exists(&mut c, &legacy));
    // The live process keeps its running job, and stays watched.
    assert_eq!(strings(&mut c, &live), ["l1"]);
    assert_eq!(
        recovery
            .watched()
            .map(|l| l.key.as_str())
            .collect::<Vec<_>>(),
        [live.as_str()]
    );
    assert_eq!(strings(&mut c, &foreign), ["theirs"]);
    assert_eq!(
        get(&mut c, &t.key("jq:gitlab-fetch:scan")).as_deref(),
        Some("ours:1:abc")
    );

    // Its heartbeat stops: the next turn (no new scan) puts the job back.
    assert_eq!(turn(&mut conn, &mut recovery), 0);
    redis::cmd("DEL")
        .arg(t.key(&heartbeat(LIVE)))
        .exec(&mut c)
        .expect("DEL");
    assert_eq!(turn(&mut conn, &mut recovery), 1);
    assert_eq!(strings(&mut c, &queue), ["l1", "d1", "d2", "d3", "waiting"]);
    assert_eq!(recovery.watched().count(), 0);
    assert_eq!(strings(&mut c, &foreign), ["theirs"]);
}

fn get(c: &mut redis::Connection, key: &str) -> Option<String> {
    redis::cmd("GET").arg(key).query(c).expect("GET")
}

#[test]
fn a_dead_processs_lists_go_back_and_a_live_ones_stay() {
    dead_and_live_processes("");
}

#[test]
fn under_a_namespace() {
    dead_and_live_processes("resque:gitlab:");
}

#[test]
fn one_server_scans_per_interval() {
    let t = TestRedis::start();
    let mut c = t.conn();
    let mut conn = BlockingConn::new(&t.redis()).expect("connection");
    let mut first = Recovery::new("ours:1:a", Duration::from_secs(60));
    let mut second = Recovery::new("ours:2:b", Duration::from_secs(60));
    assert_eq!(turn(&mut conn, &mut first), 0);
    let dead = taken(&t, &mut c, "default", DEAD, &["d1"]);
    // The lease is the first's: the second does not scan, and the first's next scan is a minute away.
    assert_eq!(turn(&mut conn, &mut second), 0);
    assert_eq!(turn(&mut conn, &mut first), 0);
    assert_eq!(llen(&mut c, &dead), 1);
    // Once the lease has expired, the next server whose scan is due scans.
    redis::cmd("DEL")
        .arg("jq:gitlab-fetch:scan")
        .exec(&mut c)
        .expect("DEL");
    let mut third = Recovery::new("ours:3:c", Duration::from_secs(60));
    assert_eq!(turn(&mut conn, &mut third), 1);
    assert_eq!(strings(&mut c, "queue:default"), ["d1"]);
}

#[test]
fn a_running_server_recovers_at_start_and_only_when_enabled() {
    let t = TestRedis::start();
    let mut c = t.conn();
    let dead = taken(&t, &mut c, "default", DEAD, &["d1", "d2"]);
    // Off: nothing moves.
    let off =
        Server::start(t.redis(), server_config("ours:1:aaa", &[("other", 1)])).expect("starts");
    // Stopping waits for the background tasks, each of which has run its first turn by then.
    off.stop().expect("stops");
    assert_eq!(llen(&mut c, &dead), 2);
    assert!(!exists(&mut c, "jq:gitlab-fetch:scan"));

    let config = ServerConfig {
        gitlab_fetch_scan: Some(Duration::from_secs(60)),
        ..server_config("ours:2:bbb", &[("other", 1)])
    };
    let started = Instant::now();
    let on = Server::start(t.redis(), config).expect("starts");
    wait_for("the stranded jobs to be back in their queue", || {
        llen(&mut c, "queue:default") == 2
    });
    assert!(started.elapsed() < TURN, "{:?}", started.elapsed());
    assert_eq!(strings(&mut c, "queue:default"), ["d1", "d2"]);
    on.stop().expect("stops");
}
