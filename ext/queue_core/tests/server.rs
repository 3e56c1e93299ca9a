//! The process lifecycle against a real Redis: the heartbeat Sidekiq's API and dashboard read, and a
//! stop that leaves every job either finished or back on its queue.

mod support;

use std::time::Duration;

use queue_core::fetch::{FetchShared, Fetcher, QueueOrder};
use queue_core::link::blocking::BlockingConn;
use queue_core::server::Server;
use queue_core::{api, client, heartbeat, Redis};
use serde_json::Value;

use support::*;

const IDENTITY: &str = "host:123:abcdefabcdef";
const INFO: &str = r#"{"hostname":"host","started_at":1700000000.0,"pid":123,"tag":"app","concurrency":2,"queues":["default"],"labels":[],"identity":"host:123:abcdefabcdef"}"#;

fn push(redis: &Redis, queue: &str, jobs: &[Vec<u8>]) {
    let mut bc = BlockingConn::new(redis).expect("blocking connection");
    bc.run(async |c| client::push(c, queue, jobs).await)
        .expect("push");
}

fn field<T: std::str::FromStr>(c: &mut redis::Connection, key: &str, name: &str) -> T {
    let raw = hget(c, key, name).unwrap_or_else(|| panic!("{key} has no field {name}"));
    raw.parse()
        .unwrap_or_else(|_| panic!("{key}.{name} = {raw:?} does not parse"))
}

#[test]
fn stop_puts_back_jobs_a_hung_thread_still_holds_and_deregisters_the_process() {
    let t = TestRedis::start();
    let redis = t.redis();
    let mut c = t.conn();

    let server = Server::start(redis.clone(), server_config(IDENTITY, &[("default", 1)]))
        .expect("server starts");
    assert_eq!(smembers(&mut c, "processes"), vec![IDENTITY]);
    assert!(
        exists(&mut c, IDENTITY),
        "the first beat wrote the process hash"
    );

    // A thread that took a job (and prefetched another) and never came back.
    let mut hung = server.fetcher("hung").expect("fetcher");
    warm_up(&redis, &mut hung, "default");
    let jobs: Vec<Vec<u8>> = (1..=3).map(|n| job("default", n)).collect();
    push(&redis, "default", &jobs);
    let (_, running) = hung
        .next(Duration::from_secs(5))
        .expect("fetch")
        .expect("a job");
    assert_eq!(running, jobs[0]);
    let working = redis.keys().working("default", IDENTITY, "hung");
    assert_eq!(llen(&mut c, &working), 2);

    assert_eq!(
        server.stop().expect("stop"),
        2,
        "the running and the prefetched job"
    );

    assert_eq!(
        queue_in_run_order(&mut c, "queue:default"),
        jobs,
        "both went back ahead of the job still queued, in order"
    );
    assert_eq!(llen(&mut c, &working), 0);
    assert!(smembers(&mut c, "processes").is_empty());
    for key in [
        IDENTITY.to_owned(),
        format!("{IDENTITY}:workers"),
        format!("{IDENTITY}:work"),
        redis.keys().working_index(IDENTITY),
    ] {
        assert!(!exists(&mut c, &key), "{key} is left after stop");
    }
    let alive: Option<f64> = redis::cmd("ZSCORE")
        .arg("jq:alive")
        .arg(IDENTITY)
        .query(&mut c)
        .expect("ZSCORE");
    assert_eq!(alive, None, "a stopped process is not awaiting recovery");

    // The hung thread wakes up late: it gets no more work, and closing it does not put back a second
    // copy of the job it had prefetched.
    assert_eq!(hung.next(Duration::ZERO).expect("fetch"), None);
    drop(hung);
    assert_eq!(queue_in_run_order(&mut c, "queue:default"), jobs);
}

#[test]
fn heartbeat_publishes_the_process_and_its_busy_jobs_as_sidekiq_does() {
    let t = TestRedis::start();
    let redis = t.redis();
    let mut c = t.conn();
    let mut bc = BlockingConn::new(&redis).expect("blocking connection");
    let running = job("default", 1);
    push(&redis, "default", std::slice::from_ref(&running));

    let order = QueueOrder::new(vec![("default".to_owned(), 1)], true).expect("queue order");
    let shared = FetchShared::new(redis.clone(), IDENTITY, order, 2, 10);
    let mut fetcher = Fetcher::new(shared.clone(), "tid-1").expect("fetcher");
    assert_eq!(
        fetcher.next(Duration::from_secs(5)).expect("fetch"),
        Some(("default".to_owned(), running.clone()))
    );
    // A dashboard asked the process to go quiet.
    redis::cmd("LPUSH")
        .arg(format!("{IDENTITY}-signals"))
        .arg("TSTP")
        .exec(&mut c)
        .expect("LPUSH");

    let signal = bc
        .run(async |c| heartbeat::beat(c, &shared, INFO).await)
        .expect("beat");
    assert_eq!(signal.as_deref(), Some("TSTP"));
    assert!(!exists(&mut c, &format!("{IDENTITY}-signals")));

    assert_eq!(smembers(&mut c, "processes"), vec![IDENTITY]);
    let fields: Vec<String> = hgetall(&mut c, IDENTITY)
        .into_iter()
        .map(|(k, _)| k)
        .collect();
    assert_eq!(fields, ["beat", "busy", "info", "quiet", "rss", "rtt_us"]);
    assert_eq!(hget(&mut c, IDENTITY, "info").as_deref(), Some(INFO));
    assert_eq!(field::<i64>(&mut c, IDENTITY, "busy"), 1);
    assert!(field::<f64>(&mut c, IDENTITY, "beat") > 1.7e9);
    assert_eq!(hget(&mut c, IDENTITY, "quiet").as_deref(), Some("false"));
    field::<u64>(&mut c, IDENTITY, "rss");
    field::<u64>(&mut c, IDENTITY, "rtt_us");
    assert!(
        (1..=60).contains(&ttl(&mut c, IDENTITY)),
        "the process hash expires like Sidekiq's"
    );

    for busy_key in [format!("{IDENTITY}:workers"), format!("{IDENTITY}:work")] {
        let entries = hgetall(&mut c, &busy_key);
        assert_eq!(entries.len(), 1, "{busy_key}: {entries:?}");
        let (tid, entry) = &entries[0];
        assert_eq!(tid, "tid-1");
        let entry: Value = serde_json::from_str(entry).expect("busy entry is JSON");
        assert_eq!(entry["queue"], "default");
        assert_eq!(
            entry["payload"].as_str(),
            Some(text(&running).as_str()),
            "the payload is the job's JSON as a string"
        );
        // When the job started, in whole seconds since the epoch (kept as an instant, shown so).
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("clock after the epoch")
            .as_secs() as i64;
        let run_at = entry["run_at"].as_i64().expect("run_at is an Integer");
        assert!(
            (now - 10..=now).contains(&run_at),
            "run_at {run_at}, now {now}"
        );
        assert!((1..=60).contains(&ttl(&mut c, &busy_key)));
    }

    // The job finishes; the next beat shows an idle, quiet process.
    fetcher.done();
    assert_eq!(fetcher.next(Duration::ZERO).expect("fetch"), None);
    shared.quiet();
    let signal = bc
        .run(async |c| heartbeat::beat(c, &shared, INFO).await)
        .expect("beat");
    assert_eq!(signal, None);
    assert_eq!(field::<i64>(&mut c, IDENTITY, "busy"), 0);
    assert_eq!(hget(&mut c, IDENTITY, "quiet").as_deref(), Some("true"));
    assert!(!exists(&mut c, &format!("{IDENTITY}:workers")));
    assert!(!exists(&mut c, &format!("{IDENTITY}:work")));
    assert_eq!(counter(&mut c, "stat:processed"), 1);

    bc.run(async |c| heartbeat::clear(c, IDENTITY).await)
        .expect("clear");
    assert!(smembers(&mut c, "processes").is_empty());
    assert!(!exists(&mut c, IDENTITY));
    fetcher.close().expect("close");
}

#[test]
fn stop_never_puts_back_a_job_that_finished() {
    let t = TestRedis::start();
    let redis = t.redis();
    let mut c = t.conn();
    let mut config = server_config(IDENTITY, &[("default", 1)]);
    config.concurrency = 1;
    let server = Server::start(redis.clone(), config).expect("server starts");
    let mut fetcher = server.fetcher("t1").expect("fetcher");
    warm_up(&redis, &mut fetcher, "default");
    let jobs: Vec<Vec<u8>> = (1..=3).map(|n| job("default", n)).collect();
    push(&redis, "default", &jobs);

    // The first job finishes and the second hangs, with no call of the fetcher in between; the
    // third is prefetched.
    let (_, first) = fetcher
        .next(Duration::from_secs(5))
        .expect("fetch")
        .expect("a job");
    assert_eq!(first, jobs[0]);
    fetcher.done();
    let (_, second) = fetcher
        .next(Duration::from_secs(5))
        .expect("fetch")
        .expect("a job");
    assert_eq!(second, jobs[1]);
    let working = redis.keys().working("default", IDENTITY, "t1");
    // The finished job's acknowledgement was written when it finished; no further call is needed.
    wait_for("the finished job to be acknowledged", || {
        llen(&mut c, &working) == 2
    });

    assert_eq!(server.stop().expect("stop"), 2);
    assert_eq!(
        queue_in_run_order(&mut c, "queue:default"),
        vec![jobs[1].clone(), jobs[2].clone()],
        "the finished job stays finished; the others are back in order"
    );
    assert_eq!(llen(&mut c, &working), 0);

    drop(fetcher);
    assert_eq!(
        llen(&mut c, "queue:default"),
        2,
        "closing late duplicates nothing"
    );
    assert_eq!(
        counter(&mut c, "stat:processed"),
        2,
        "the warm-up and the finished job, each counted once"
    );
}

#[test]
fn stats_report_what_redis_holds() {
    let t = TestRedis::start();
    let redis = t.redis();
    let mut bc = BlockingConn::new(&redis).expect("blocking connection");
    push(&redis, "default", &[job("default", 1), job("default", 2)]);
    push(&redis, "low", &[job("low", 3)]);
    bc.run(async |c| client::schedule(c, &[(4_000_000_000.0, job("default", 4))]).await)
        .expect("schedule");
    let server = Server::start(redis.clone(), server_config(IDENTITY, &[("default", 1)]))
        .expect("server starts");

    let stats = bc.run(async |c| api::stats(c).await).expect("stats");
    assert_eq!(
        stats,
        api::Stats {
            processed: 0,
            failed: 0,
            expired: 0,
            scheduled_size: 1,
            retry_size: 0,
            dead_size: 0,
            processes_size: 1,
            workers_size: 0,
            enqueued: 3,
            // The oldest default job was enqueued at 1700000000.5 (job()).
            default_queue_latency: stats.default_queue_latency,
            queues: vec![("default".to_owned(), 2), ("low".to_owned(), 1)],
        }
    );
    assert!(stats.default_queue_latency > 1.0e7, "{stats:?}");
    assert_eq!(
        bc.run(async |c| api::queue_size(c, "low").await)
            .expect("queue size"),
        1
    );
    server.stop().expect("stop");
    let stats = bc.run(async |c| api::stats(c).await).expect("stats");
    assert_eq!(stats.processes_size, 0);
    assert_eq!(stats.enqueued, 3);
}
