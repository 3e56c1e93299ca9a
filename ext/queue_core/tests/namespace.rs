//! A namespace (GitLab runs Sidekiq under `resque:gitlab:`) prefixes every key the engine writes,
//! Sidekiq's and its own, through the whole life of a job and a process.

mod support;

use std::time::Duration;

use queue_core::clock::now_f64;
use queue_core::fetch::{FetchShared, Fetcher, QueueOrder};
use queue_core::link::blocking::BlockingConn;
use queue_core::liveness;
use queue_core::retry::{Failure, RetryIn};
use queue_core::server::Server;
use queue_core::{client, heartbeat, scheduler};

use support::*;

const NS: &str = "resque:gitlab:";
const IDENTITY: &str = "host:123:abcdefabcdef";

fn assert_all_namespaced(c: &mut redis::Connection, when: &str) -> Vec<String> {
    let keys = all_keys(c);
    let stray: Vec<&String> = keys.iter().filter(|k| !k.starts_with(NS)).collect();
    assert!(stray.is_empty(), "{when}: keys outside {NS:?}: {stray:?}");
    keys
}

fn take(fetcher: &mut Fetcher) -> Vec<u8> {
    fetcher
        .next(Duration::from_secs(5))
        .expect("fetch")
        .expect("a job")
        .1
}

#[test]
fn every_key_a_job_and_its_process_write_carries_the_namespace() {
    let t = TestRedis::with_namespace(NS);
    let redis = t.redis();
    let mut c = t.conn();
    let mut bc = BlockingConn::new(&redis).expect("blocking connection");
    let now = now_f64();

    // Five jobs in all (one comes through the schedule): four run, one is still queued.
    let jobs: Vec<Vec<u8>> = (1..=4).map(|n| job("default", n)).collect();
    bc.run(async |c| client::push(c, "default", &jobs).await)
        .expect("push");
    let due = job("default", 5);
    let later = job("default", 6);
    bc.run(async |c| client::schedule(c, &[(now - 1.0, due), (now + 3600.0, later)]).await)
        .expect("schedule");

    let mut config = server_config(IDENTITY, &[("default", 1)]);
    config.concurrency = 1;
    config.max_batch = 1;
    let server = Server::start(redis.clone(), config).expect("server starts");
    assert!(bc
        .run(async |c| scheduler::lead(c, IDENTITY).await)
        .expect("lead"));
    assert_eq!(
        bc.run(async |c| scheduler::enqueue_due(c).await)
            .expect("enqueue_due"),
        1
    );

    let mut fetcher = server.fetcher("t1").expect("fetcher");
    take(&mut fetcher);
    fetcher.done();
    take(&mut fetcher);
    fetcher
        .fail(&Failure {
            error_class: "RuntimeError".to_owned(),
            error_message: "boom".to_owned(),
            backtrace: Vec::new(),
            retry_in: RetryIn::Default,
            worker_retry: None,
        })
        .expect("fail");
    take(&mut fetcher);
    fetcher.bury().expect("bury");
    // One job is still running when the process stops.
    take(&mut fetcher);
    let silent = bc
        .run(async |c| liveness::beat(c, Some(IDENTITY), &[]).await)
        .expect("liveness beat");
    assert!(silent.is_empty());

    let keys = assert_all_namespaced(&mut c, "while running");
    for name in [
        "queue:default",
        "queues",
        "schedule",
        "retry",
        "dead",
        "processes",
        IDENTITY,
        "stat:processed",
        "stat:failed",
        &format!("stat:processed:{}", today()),
        &format!("stat:failed:{}", today()),
        "jq:alive",
        &format!("jq:working:{IDENTITY}"),
        &format!("jq:working:{IDENTITY}:t1:default"),
        "jq:scheduler:leader",
    ] {
        let key = format!("{NS}{name}");
        assert!(keys.contains(&key), "{key} was not written; keys: {keys:?}");
    }
    // Queue names inside the `queues` set stay bare, as Sidekiq under redis-namespace keeps them.
    assert_eq!(smembers(&mut c, &format!("{NS}queues")), vec!["default"]);

    fetcher.close().expect("close");
    server.stop().expect("stop");
    let keys = assert_all_namespaced(&mut c, "after stop");
    assert!(keys.contains(&format!("{NS}queue:default")));
    assert_eq!(
        llen(&mut c, &format!("{NS}queue:default")),
        2,
        "the job still running at stop went back under the namespace"
    );
}

#[test]
fn heartbeat_busy_jobs_and_signals_carry_the_namespace() {
    let t = TestRedis::with_namespace(NS);
    let redis = t.redis();
    let mut c = t.conn();
    let mut bc = BlockingConn::new(&redis).expect("blocking connection");
    bc.run(async |c| client::push(c, "default", &[job("default", 1)]).await)
        .expect("push");
    let order = QueueOrder::new(vec![("default".to_owned(), 1)], true).expect("queue order");
    let shared = FetchShared::new(redis.clone(), IDENTITY, order, 1, 1);
    let mut fetcher = Fetcher::new(shared.clone(), "t1").expect("fetcher");
    take(&mut fetcher);
    redis::cmd("LPUSH")
        .arg(format!("{NS}{IDENTITY}-signals"))
        .arg("TTIN")
        .exec(&mut c)
        .expect("LPUSH");
    let signal = bc
        .run(async |c| heartbeat::beat(c, &shared, "{}").await)
        .expect("beat");
    assert_eq!(
        signal.as_deref(),
        Some("TTIN"),
        "signals are read under the namespace"
    );
    let keys = assert_all_namespaced(&mut c, "after a busy heartbeat");
    for name in [
        format!("{IDENTITY}:workers"),
        format!("{IDENTITY}:work"),
        IDENTITY.to_owned(),
    ] {
        let key = format!("{NS}{name}");
        assert!(keys.contains(&key), "{key} was not written; keys: {keys:?}");
    }
    fetcher.done();
    fetcher.close().expect("close");
    bc.run(async |c| heartbeat::clear(c, IDENTITY).await)
        .expect("clear");
    assert_all_namespaced(&mut c, "after clear");
    assert_eq!(counter(&mut c, &format!("{NS}stat:processed")), 1);
}
