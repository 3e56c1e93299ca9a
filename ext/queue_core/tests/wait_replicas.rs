//! `wait_replicas` against a real primary and replica: every push path (queue, schedule, the
//! engine-built job, deduplicated one by one and in bulk, ordered) returns only once the replica has
//! what it wrote, and with no replica to confirm it, a push fails with a replication error after the
//! timeout, having been written once and not again.

mod support;

use std::time::{Duration, Instant};

use queue_core::client;
use queue_core::dedup::{DedupJob, FlagCheck, PushOptions};
use queue_core::link::blocking::SyncConn;
use queue_core::link::wait_replicas::WaitReplicas;
use queue_core::ordered::push::NewJob;
use queue_core::ordered::OrderedQueue;
use queue_core::{Error, Redis, RedisConfig};

use support::servers::{free_port, redis_server, Process};
use support::{job, llen};
fn conn(port: u16) -> Option<redis::Connection> {
    redis::Client::open(format!("redis://127.0.0.1:{port}"))
        .ok()?
        .get_connection_with_timeout(Duration::from_secs(2))
        .ok()
}

fn wait_until(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !check() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

struct Pair {
    primary: u16,
    replica: u16,
    replica_process: Option<Process>,
    _primary_process: Process,
    _dir: tempfile::TempDir,
}

fn pair() -> Pair {
    let dir = tempfile::tempdir().expect("a temp dir");
    let (primary, replica) = (free_port(), free_port());
    let primary_process = redis_server(dir.path(), "primary", primary, &[]);
    wait_until("the primary", || conn(primary).is_some());
    let replica_process = redis_server(
        dir.path(),
        "replica",
        replica,
        &[
            "--replicaof".to_owned(),
            "127.0.0.1".to_owned(),
            primary.to_string(),
        ],
    );
    wait_until("the replica in sync", || {
        conn(replica).is_some_and(|mut c| {
            redis::cmd("INFO")
                .arg("replication")
                .query::<String>(&mut c)
                .is_ok_and(|info| info.contains("master_link_status:up"))
        })
    });
    Pair {
        primary,
        replica,
        replica_process: Some(replica_process),
        _primary_process: primary_process,
        _dir: dir,
    }
}

fn waiting(port: u16, timeout: Duration) -> Redis {
    let wait = WaitReplicas::new(1, timeout).expect("valid");
    Redis::new(RedisConfig::new(&format!("redis://127.0.0.1:{port}"), "").with_wait_replicas(wait))
        .expect("a config")
}

fn dedup_opts() -> PushOptions {
    PushOptions {
        class: "HardWorker".to_owned(),
        ttl: 600,
        idempotent: true,
        reschedule: false,
        flag: FlagCheck::Given(false),
    }
}

fn dedup_job(n: usize) -> DedupJob {
    let args = format!("[{n}]");
    DedupJob {
        jid: format!("jid{n}"),
        json: format!(r#"{{"class":"HardWorker","args":{args},"queue":"dd","jid":"jid{n}"}}"#)
            .into_bytes(),
        args: args.into_bytes(),
        at: None,
    }
}

#[test]
fn every_push_path_returns_with_its_writes_on_the_replica() {
    let p = pair();
    let redis = waiting(p.primary, Duration::from_secs(5));
    let mut sync = SyncConn::polling(&redis);
    // The scripts are not cached yet: the first scripted push gets NOSCRIPT, loads, and sends again.
    let mut primary = conn(p.primary).expect("the primary");
    redis::cmd("SCRIPT")
        .arg("FLUSH")
        .query::<()>(&mut primary)
        .expect("SCRIPT FLUSH");
    let mut replica = conn(p.replica).expect("the replica");

    // Each check reads the replica right after the push returned: WAIT made it wait for that.
    client::push_sync(&mut sync, "plain", &[job("plain", 1)]).expect("push");
    assert_eq!(llen(&mut replica, "queue:plain"), 1);

    client::schedule_sync(&mut sync, &[(4_000_000_000.0, job("later", 1))]).expect("schedule");
    let scheduled: i64 = redis::cmd("ZCARD")
        .arg("schedule")
        .query(&mut replica)
        .expect("ZCARD");
    assert_eq!(scheduled, 1);

    let prefix = br#"{"queue":"built","class":"HardWorker""#;
    let pushed = client::push_new_sync(&mut sync, "built", prefix, b"[1]", None).expect("push_new");
    assert!(matches!(pushed, client::Pushed::Queued(_)), "{pushed:?}");
    assert_eq!(llen(&mut replica, "queue:built"), 1);
    let jids = client::push_bulk_new_sync(&mut sync, "built", prefix, &[b"[2]", b"[3]"], None)
        .expect("push_bulk_new");
    assert_eq!(jids.len(), 2);
    assert_eq!(llen(&mut replica, "queue:built"), 3);

    let opts = dedup_opts();
    let one =
        queue_core::dedup::push_sync(&mut sync, "dd", &opts, &[dedup_job(1)]).expect("dedup one");
    assert_eq!(one.len(), 1);
    assert_eq!(llen(&mut replica, "queue:dd"), 1);
    let again =
        queue_core::dedup::push_sync(&mut sync, "dd", &opts, &[dedup_job(1)]).expect("dedup again");
    assert!(
        matches!(again.as_slice(), [queue_core::dedup::Outcome::Dropped(_)]),
        "{again:?}"
    );
    queue_core::dedup::push_sync(&mut sync, "dd", &opts, &[dedup_job(2), dedup_job(3)])
        .expect("dedup bulk");
    assert_eq!(llen(&mut replica, "queue:dd"), 3);
    let built = client::push_new_sync(&mut sync, "dd", prefix, b"[9]", Some(&opts))
        .expect("dedup push_new");
    assert!(matches!(built, client::Pushed::Queued(_)), "{built:?}");
    assert_eq!(llen(&mut replica, "queue:dd"), 4);

    let q = OrderedQueue::new("", "OrderedWorker", 2).expect("an ordered queue");
    let new = NewJob {
        id: "o1".to_owned(),
        payload: b"{}".to_vec(),
        score: 1.0,
        perform_in: 0.0,
    };
    assert_eq!(
        queue_core::ordered::push::push(&mut sync, &q, &[new]).expect("ordered push"),
        1
    );
    let keys = |c: &mut redis::Connection| {
        let mut keys: Vec<String> = redis::cmd("KEYS").arg("*").query(c).expect("KEYS");
        keys.sort();
        keys
    };
    let (on_primary, on_replica) = (keys(&mut primary), keys(&mut replica));
    assert!(
        on_primary.iter().any(|k| k.contains("OrderedWorker")),
        "{on_primary:?}"
    );
    assert_eq!(on_primary, on_replica);
}

#[test]
fn a_push_no_replica_confirms_fails_after_the_timeout_and_is_not_sent_again() {
    let mut p = pair();
    let redis = waiting(p.primary, Duration::from_millis(150));
    let mut sync = SyncConn::polling(&redis);
    client::push_sync(&mut sync, "q", &[job("q", 1)]).expect("a push the replica confirms");

    drop(p.replica_process.take()); // killed: nothing confirms what follows
    let mut primary = conn(p.primary).expect("the primary");
    wait_until("the primary to see no replica", || {
        redis::cmd("INFO")
            .arg("replication")
            .query::<String>(&mut primary)
            .is_ok_and(|info| info.contains("connected_slaves:0"))
    });

    let started = Instant::now();
    let e = client::push_sync(&mut sync, "q", &[job("q", 2)]).expect_err("no replica");
    let took = started.elapsed();
    let Error::Replication {
        wanted,
        reached,
        timeout_ms,
    } = e
    else {
        panic!("not a replication error: {e}");
    };
    assert_eq!((wanted, reached, timeout_ms), (1, 0, 150));
    assert!(took >= Duration::from_millis(140), "{took:?}");
    assert!(!e.is_connection());
    let text = e.to_string();
    assert!(text.contains("1 replica(s)") && text.contains("only 0") && text.contains("150 ms"));
    // Written once, on the master, and not again.
    assert_eq!(llen(&mut primary, "queue:q"), 2);

    let e = queue_core::dedup::push_sync(&mut sync, "dd", &dedup_opts(), &[dedup_job(1)])
        .expect_err("a deduplicated push with no replica");
    assert!(matches!(e, Error::Replication { .. }), "{e}");
    assert_eq!(llen(&mut primary, "queue:dd"), 1);
    let e = client::schedule_sync(&mut sync, &[(4_000_000_000.0, job("later", 1))])
        .expect_err("a scheduled push with no replica");
    assert!(matches!(e, Error::Replication { .. }), "{e}");

    // The connection is still good: the error was not the connection's.
    let pong: String = sync.cmd(&redis::cmd("PING")).expect("PING");
    assert_eq!(pong, "PONG");
}
