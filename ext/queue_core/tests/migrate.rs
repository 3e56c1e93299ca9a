//! Renaming a queue against a real Redis: queued, scheduled and retrying jobs of the old queue move to
//! the new one with nothing changed but their queue fields, deduplication keys follow with their TTLs,
//! and with a server fetching and a client pushing throughout, every job runs exactly once.

mod support;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use queue_core::client;
use queue_core::link::blocking::BlockingConn;
use queue_core::migrate::{self, Migrated};
use queue_core::server::Server;
use queue_core::{Error, Redis};

use support::*;

const HASH: &str = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";

/// A job as another Sidekiq peer might have written it: unknown fields, integers no double holds,
/// floats whose digits matter, escapes.
fn odd_job(queue: &str) -> String {
    format!(
        concat!(
            r#"{{"class":"Billing::InvoiceWorker","args":[123456789012345678901234567890,0.1,1.0e-07,"ünï\tq\"\\"],"#,
            r#""queue":"{}","jid":"0123456789abcdef01234567","retry":3,"created_at":1700000000.123456,"#,
            r#""custom_meta":{{"z":[null,true],"a":{{"big":18446744073709551616}}}},"bid":null}}"#
        ),
        queue
    )
}

fn migrate(redis: &Redis, from: &str, to: &str) -> queue_core::Result<Migrated> {
    let mut bc = BlockingConn::new(redis).expect("blocking connection");
    bc.run(async |c| migrate::migrate_queue(c, from, to).await)
}

fn push(redis: &Redis, queue: &str, jobs: &[Vec<u8>]) {
    let mut bc = BlockingConn::new(redis).expect("blocking connection");
    bc.run(async |c| client::push(c, queue, jobs).await)
        .expect("push");
}

fn zadd(c: &mut redis::Connection, key: &str, score: &str, member: &str) {
    redis::cmd("ZADD")
        .arg(key)
        .arg(score)
        .arg(member)
        .query::<i64>(c)
        .expect("ZADD");
}

#[test]
fn queued_jobs_move_in_order_with_only_their_queue_changed() {
    let t = TestRedis::with_namespace("resque:gitlab:");
    let redis = t.redis();
    let mut c = t.conn();
    let mut jobs: Vec<Vec<u8>> = (1..=250).map(|n| job("old", n)).collect();
    jobs.insert(0, odd_job("old").into_bytes());
    push(&redis, "old", &jobs);
    push(&redis, "new", &[job("new", 999)]);
    // Not a job: it belongs to the queue whose list holds it, so it moves as it is.
    redis::cmd("LPUSH")
        .arg(t.key("queue:old"))
        .arg("{not json")
        .query::<i64>(&mut c)
        .expect("LPUSH");

    let moved = migrate(&redis, "old", "new").expect("migrate");

    assert_eq!(
        moved,
        Migrated {
            queued: 252,
            ..Migrated::default()
        }
    );
    assert!(!exists(&mut c, &t.key("queue:old")));
    assert_eq!(smembers(&mut c, &t.key("queues")), vec!["new".to_owned()]);
    let run_order = queue_in_run_order(&mut c, &t.key("queue:new"));
    let mut expected = vec![job("new", 999)];
    expected.extend(jobs.iter().map(|j| {
        text(j)
            .replace(r#""queue":"old""#, r#""queue":"new""#)
            .into_bytes()
    }));
    expected.push(b"{not json".to_vec());
    assert_eq!(
        run_order.iter().map(|j| text(j)).collect::<Vec<_>>(),
        expected.iter().map(|j| text(j)).collect::<Vec<_>>()
    );
    // The odd job survived byte for byte but for its queue.
    assert_eq!(text(&run_order[1]), odd_job("new"));
}

#[test]
fn scheduled_and_retrying_jobs_keep_their_scores_and_other_queues_are_untouched() {
    let t = TestRedis::start();
    let redis = t.redis();
    let mut c = t.conn();
    let retrying = concat!(
        r#"{"class":"W","args":[1],"queue":"old","retry_queue":"old","jid":"aaaaaaaaaaaaaaaaaaaaaaaa","#,
        r#""retry_count":2,"error_message":"boom","failed_at":1700000000.25}"#
    );
    let other = r#"{"class":"W","args":[2],"queue":"older","jid":"bbbbbbbbbbbbbbbbbbbbbbbb"}"#;
    zadd(&mut c, "schedule", "1900000000.125", &odd_job("old"));
    zadd(&mut c, "schedule", "1900000001.5", other);
    zadd(&mut c, "schedule", "1900000002", "not a job");
    zadd(&mut c, "retry", "1900000003.75", retrying);

    let moved = migrate(&redis, "old", "new").expect("migrate");

    assert_eq!(
        moved,
        Migrated {
            scheduled: 1,
            retry: 1,
            ..Migrated::default()
        }
    );
    let schedule: Vec<(String, f64)> = zrange_scores(&mut c, "schedule")
        .into_iter()
        .map(|(m, s)| (text(&m), s))
        .collect();
    assert_eq!(
        schedule,
        vec![
            (odd_job("new"), 1900000000.125),
            (other.to_owned(), 1900000001.5),
            ("not a job".to_owned(), 1900000002.0),
        ]
    );
    let retry: Vec<(String, f64)> = zrange_scores(&mut c, "retry")
        .into_iter()
        .map(|(m, s)| (text(&m), s))
        .collect();
    assert_eq!(
        retry,
        vec![(retrying.replace(r#""old""#, r#""new""#), 1900000003.75)]
    );
}

#[test]
fn deduplication_keys_follow_with_their_ttl() {
    let t = TestRedis::with_namespace("resque:gitlab:");
    let redis = t.redis();
    let mut c = t.conn();
    let set = |c: &mut redis::Connection, key: &str, value: &str, ttl: Option<u64>| {
        let mut cmd = redis::cmd("SET");
        cmd.arg(key).arg(value);
        if let Some(ttl) = ttl {
            cmd.arg("EX").arg(ttl);
        }
        cmd.query::<()>(c).expect("SET");
    };
    let old = format!("resque:gitlab:duplicate:old:{HASH}");
    let other_hash = HASH.replace('9', "8");
    let clash_old = format!("resque:gitlab:duplicate:old:{other_hash}");
    let clash_new = format!("resque:gitlab:duplicate:new:{other_hash}");
    let sub_queue = format!("resque:gitlab:duplicate:old:sub:{HASH}");
    set(&mut c, &old, "jid-1", Some(3600));
    set(&mut c, &clash_old, "jid-2", Some(3600));
    set(&mut c, &clash_new, "jid-3", Some(600));
    set(&mut c, &sub_queue, "jid-4", Some(3600));
    // A job that names its key: the field follows the key.
    push(
        &redis,
        "old",
        &[
            format!(r#"{{"class":"W","args":[],"queue":"old","idempotency_key":"{old}"}}"#)
                .into_bytes(),
        ],
    );

    let moved = migrate(&redis, "old", "new").expect("migrate");

    assert_eq!(moved.keys, 1);
    assert_eq!(moved.queued, 1);
    let new = format!("resque:gitlab:duplicate:new:{HASH}");
    assert!(!exists(&mut c, &old));
    assert_eq!(hget_string(&mut c, &new).as_deref(), Some("jid-1"));
    let kept = ttl(&mut c, &new);
    assert!((3590..=3600).contains(&kept), "TTL {kept}");
    // The new queue's own key stands; the old one is gone.
    assert!(!exists(&mut c, &clash_old));
    assert_eq!(hget_string(&mut c, &clash_new).as_deref(), Some("jid-3"));
    assert!(ttl(&mut c, &clash_new) <= 600);
    // Queue "old:sub" is another queue.
    assert_eq!(hget_string(&mut c, &sub_queue).as_deref(), Some("jid-4"));
    let queued = lrange(&mut c, "resque:gitlab:queue:new");
    assert_eq!(
        text(&queued[0]),
        format!(r#"{{"class":"W","args":[],"queue":"new","idempotency_key":"{new}"}}"#)
    );
}

fn hget_string(c: &mut redis::Connection, key: &str) -> Option<String> {
    redis::cmd("GET").arg(key).query(c).expect("GET")
}

#[test]
fn bad_names_are_refused() {
    let t = TestRedis::start();
    let redis = t.redis();
    for (from, to) in [("same", "same"), ("", "new"), ("old", "has space")] {
        match migrate(&redis, from, to) {
            Err(Error::InvalidArgument(_)) => {}
            other => panic!("{from:?} -> {to:?}: expected InvalidArgument, got {other:?}"),
        }
    }
}

/// A server fetches from both queues and a client pushes to the old one while the migration runs over
/// and over: each job is run exactly once, and the migration did move jobs.
#[test]
fn with_a_server_and_a_client_at_work_no_job_is_lost_or_duplicated() {
    const PRELOADED: usize = 3_000;
    const PUSHED: usize = 3_000;
    let t = TestRedis::start();
    let redis = t.redis();
    let preloaded: Vec<Vec<u8>> = (1..=PRELOADED).map(|n| job("old", n)).collect();
    push(&redis, "old", &preloaded);
    let mut config = server_config("host:1:migrate", &[("old", 1), ("new", 1)]);
    config.concurrency = 1;
    let server = Server::start(redis.clone(), config).expect("server starts");
    let pushing_done = AtomicBool::new(false);

    let (runs, moved) = std::thread::scope(|s| {
        let runner = s.spawn(|| {
            let mut fetcher = server.fetcher("t1").expect("fetcher");
            let mut runs: HashMap<String, Vec<String>> = HashMap::new();
            let deadline = Instant::now() + Duration::from_secs(60);
            let mut seen = 0;
            while seen < PRELOADED + PUSHED {
                assert!(Instant::now() < deadline, "only {seen} jobs ran");
                if let Some((queue, raw)) = fetcher.next(Duration::from_millis(100)).expect("fetch")
                {
                    let job: serde_json::Value = serde_json::from_slice(&raw).expect("job JSON");
                    let jid = job["jid"].as_str().expect("jid").to_owned();
                    runs.entry(jid).or_default().push(queue);
                    fetcher.done();
                    seen += 1;
                }
            }
            fetcher.close().expect("close");
            runs
        });
        let pusher = s.spawn(|| {
            for n in PRELOADED + 1..=PRELOADED + PUSHED {
                push(&redis, "old", &[job("old", n)]);
            }
            pushing_done.store(true, Ordering::SeqCst);
        });
        let mut moved = 0;
        loop {
            let done = pushing_done.load(Ordering::SeqCst);
            moved += migrate(&redis, "old", "new").expect("migrate").queued;
            if done {
                break;
            }
        }
        pusher.join().expect("pusher");
        (runner.join().expect("runner"), moved)
    });
    server.stop().expect("server stops");

    assert_eq!(runs.len(), PRELOADED + PUSHED, "every job ran");
    let twice: Vec<_> = runs.iter().filter(|(_, q)| q.len() > 1).collect();
    assert!(twice.is_empty(), "jobs run more than once: {twice:?}");
    let from_new = runs.values().filter(|q| q[0] == "new").count();
    assert_eq!(
        from_new as u64, moved,
        "every moved job ran from the new queue"
    );
    assert!(moved > 0, "the migration moved nothing");
    let mut c = t.conn();
    assert_eq!(llen(&mut c, "queue:old"), 0);
    assert_eq!(llen(&mut c, "queue:new"), 0);
}

/// The scheduler moves due jobs out of `schedule` while the migration rewrites them: each job reaches
/// exactly one queue once (the old one if the scheduler took it first, the new one otherwise).
#[test]
fn with_the_scheduler_at_work_each_scheduled_job_is_enqueued_once() {
    const JOBS: usize = 2_000;
    let t = TestRedis::start();
    let redis = t.redis();
    let now = queue_core::clock::now_f64();
    // Due across the next ~200 ms, so the scheduler's moves overlap the migration's rewrites.
    let jobs: Vec<(f64, Vec<u8>)> = (1..=JOBS)
        .map(|n| (now + n as f64 * 0.0001, job("old", n)))
        .collect();
    let mut bc = BlockingConn::new(&redis).expect("blocking connection");
    bc.run(async |c| client::schedule(c, &jobs).await)
        .expect("schedule");
    let migrated = AtomicBool::new(false);

    let (rewritten, queued) = std::thread::scope(|s| {
        let scheduler = s.spawn(|| {
            let mut bc = BlockingConn::new(&redis).expect("blocking connection");
            let deadline = Instant::now() + Duration::from_secs(30);
            loop {
                let done = migrated.load(Ordering::SeqCst);
                bc.run(async |c| queue_core::scheduler::enqueue_due(c).await)
                    .expect("enqueue_due");
                let mut c = t.conn();
                if done && zmembers(&mut c, "schedule").is_empty() {
                    return;
                }
                assert!(Instant::now() < deadline, "the schedule did not empty");
            }
        });
        // Jobs the scheduler enqueued to the old queue before their rewrite move as queued jobs.
        let (mut rewritten, mut queued) = (0, 0);
        for _ in 0..5 {
            let moved = migrate(&redis, "old", "new").expect("migrate");
            rewritten += moved.scheduled;
            queued += moved.queued;
        }
        migrated.store(true, Ordering::SeqCst);
        scheduler.join().expect("scheduler");
        (rewritten, queued)
    });

    let mut c = t.conn();
    let mut seen: HashMap<String, Vec<String>> = HashMap::new();
    for queue in ["old", "new"] {
        for raw in lrange(&mut c, &format!("queue:{queue}")) {
            let job: serde_json::Value = serde_json::from_slice(&raw).expect("job JSON");
            assert_eq!(
                job["queue"], queue,
                "a job in queue:{queue} names its queue"
            );
            let jid = job["jid"].as_str().expect("jid").to_owned();
            seen.entry(jid).or_default().push(queue.to_owned());
        }
    }
    assert_eq!(seen.len(), JOBS, "every scheduled job was enqueued");
    let twice: Vec<_> = seen.iter().filter(|(_, q)| q.len() > 1).collect();
    assert!(twice.is_empty(), "jobs enqueued twice: {twice:?}");
    let in_new = seen.values().filter(|q| q[0] == "new").count() as u64;
    assert!(rewritten > 0, "the migration rewrote no scheduled job");
    assert_eq!(
        in_new,
        rewritten + queued,
        "the new queue holds exactly the rewritten and the moved jobs"
    );
}
