//! Failed jobs against a real Redis: Sidekiq's retry rules decide between `retry`, `dead` and nowhere;
//! the job leaves its working list and is counted either way; unreadable jobs are buried as they are.

mod support;

use std::time::Duration;

use queue_core::fetch::Fetcher;
use queue_core::link::blocking::BlockingConn;
use queue_core::retry::{Failure, Fate, RetryIn};
use queue_core::server::Server;
use queue_core::{client, scheduler, Redis};
use serde_json::Value;

use support::*;

const IDENTITY: &str = "host:123:abcdefabcdef";

fn push(redis: &Redis, queue: &str, jobs: &[Vec<u8>]) {
    let mut bc = BlockingConn::new(redis).expect("blocking connection");
    bc.run(async |c| client::push(c, queue, jobs).await)
        .expect("push");
}

fn take(fetcher: &mut Fetcher) -> Vec<u8> {
    fetcher
        .next(Duration::from_secs(5))
        .expect("fetch")
        .expect("a job should have been fetched")
        .1
}

fn boom() -> Failure {
    Failure {
        error_class: "RuntimeError".to_owned(),
        error_message: "boom: ünï".to_owned(),
        backtrace: vec!["app/workers/w.rb:3:in `perform'".to_owned()],
        retry_in: RetryIn::Default,
        worker_retry: None,
    }
}

fn parse(raw: &[u8]) -> Value {
    serde_json::from_slice(raw).expect("filed job is JSON")
}

fn single_server(t: &TestRedis) -> Server {
    let mut config = server_config(IDENTITY, &[("default", 1)]);
    config.concurrency = 1;
    config.max_batch = 1;
    Server::start(t.redis(), config).expect("server starts")
}

#[test]
fn failures_are_filed_by_their_retry_policy_and_counted() {
    let t = TestRedis::start();
    let redis = t.redis();
    let mut c = t.conn();
    let retry_two = br#"{"class":"W","args":["two"],"retry":2,"queue":"default","jid":"j-two","custom":{"keep":[1,2.50]}}"#.to_vec();
    let retry_zero =
        br#"{"class":"W","args":["zero"],"retry":0,"queue":"default","jid":"j-zero"}"#.to_vec();
    let retry_off =
        br#"{"class":"W","args":["off"],"retry":false,"queue":"default","jid":"j-off"}"#.to_vec();
    let garbage = b"{\"class\":\"W\",\"args\":[ not json".to_vec();
    push(
        &redis,
        "default",
        &[
            retry_two.clone(),
            retry_zero.clone(),
            retry_off.clone(),
            garbage.clone(),
        ],
    );
    let server = single_server(&t);
    let mut fetcher = server.fetcher("t1").expect("fetcher");
    let working = redis.keys().working("default", IDENTITY, "t1");

    // retry: 2, first failure → the retry set, retry_count 0.
    assert_eq!(take(&mut fetcher), retry_two);
    let (fate, filed) = fetcher.fail(&boom()).expect("fail");
    let Fate::Retry { at } = fate else {
        panic!("expected a retry, got {fate:?}");
    };
    let retries = zrange_scores(&mut c, "retry");
    assert_eq!(retries.len(), 1);
    let (member, score) = &retries[0];
    assert_eq!(
        Some(text(member)),
        filed,
        "the set holds the job as reported"
    );
    assert!((score - at).abs() < 1e-3, "scored {score}, planned {at}");
    let job = parse(member);
    assert_eq!(job["retry_count"], 0);
    assert_eq!(job["error_class"], "RuntimeError");
    assert_eq!(job["error_message"], "boom: ünï");
    assert_eq!(job["queue"], "default");
    assert_eq!(job["jid"], "j-two");
    assert_eq!(job["args"], serde_json::json!(["two"]));
    assert!(text(member).contains(r#""custom":{"keep":[1,2.50]}"#));
    assert!(
        job.get("error_backtrace").is_none(),
        "no backtrace unless asked"
    );
    let failed_at = job["failed_at"].as_f64().expect("failed_at is a number");
    // Sidekiq's first delay: 0**4 + 15 + rand(10) * 1 seconds after the failure.
    let delay = score - failed_at;
    assert!(
        (14.999..24.001).contains(&delay),
        "first retry after {delay} s"
    );
    assert_eq!(
        llen(&mut c, &working),
        0,
        "the failed job left the working list"
    );
    assert_eq!(counter(&mut c, "stat:failed"), 1);

    // retry: 0 → straight to dead.
    assert_eq!(take(&mut fetcher), retry_zero);
    let (fate, _) = fetcher.fail(&boom()).expect("fail");
    assert_eq!(fate, Fate::Exhausted { morgue: true });
    let dead = zmembers(&mut c, "dead");
    assert_eq!(dead.len(), 1);
    let job = parse(&dead[0]);
    assert_eq!(job["jid"], "j-zero");
    assert_eq!(job["error_class"], "RuntimeError");
    assert_eq!(zmembers(&mut c, "retry").len(), 1);

    // retry: false → kept nowhere.
    assert_eq!(take(&mut fetcher), retry_off);
    let (fate, _) = fetcher.fail(&boom()).expect("fail");
    assert_eq!(fate, Fate::NoRetry);
    assert_eq!(zmembers(&mut c, "retry").len(), 1);
    assert_eq!(zmembers(&mut c, "dead").len(), 1);

    assert_eq!(counter(&mut c, "stat:failed"), 3);
    assert_eq!(counter(&mut c, &format!("stat:failed:{}", today())), 3);
    assert_eq!(
        counter(&mut c, "stat:processed"),
        3,
        "failures count as processed"
    );
    assert_stat_expiry(&mut c, "stat:failed", &format!("stat:failed:{}", today()));
    assert_stat_expiry(
        &mut c,
        "stat:processed",
        &format!("stat:processed:{}", today()),
    );
    assert_eq!(llen(&mut c, &working), 0);

    // An unreadable job is buried byte for byte.
    assert_eq!(take(&mut fetcher), garbage);
    fetcher.bury().expect("bury");
    let dead = zmembers(&mut c, "dead");
    assert_eq!(dead.len(), 2);
    assert!(dead.contains(&garbage), "the dead set keeps the raw bytes");
    assert_eq!(llen(&mut c, &working), 0);

    assert!(fetcher.fail(&boom()).is_err(), "nothing is running now");
    fetcher.close().expect("close");
    server.stop().expect("stop");
    assert_eq!(llen(&mut c, "queue:default"), 0, "no failed job came back");
}

#[test]
fn retry_two_means_two_retries_then_dead() {
    let t = TestRedis::start();
    let redis = t.redis();
    let mut c = t.conn();
    let original = br#"{"class":"W","args":[7],"retry":2,"queue":"default","jid":"j7"}"#.to_vec();
    push(&redis, "default", std::slice::from_ref(&original));
    let server = single_server(&t);
    let mut fetcher = server.fetcher("t1").expect("fetcher");
    let mut bc = BlockingConn::new(&redis).expect("blocking connection");

    for attempt in 0..2 {
        let raw = take(&mut fetcher);
        if attempt == 0 {
            assert_eq!(raw, original);
        }
        let (fate, _) = fetcher.fail(&boom()).expect("fail");
        assert!(
            matches!(fate, Fate::Retry { .. }),
            "attempt {attempt}: {fate:?}"
        );
        let retries = zmembers(&mut c, "retry");
        assert_eq!(retries.len(), 1);
        let job = parse(&retries[0]);
        assert_eq!(job["retry_count"], attempt);
        assert_eq!(job.get("retried_at").is_some(), attempt > 0);
        // Make the retry due now instead of waiting for it, then let the scheduler move it.
        redis::cmd("ZADD")
            .arg("retry")
            .arg("XX")
            .arg(0)
            .arg(&retries[0])
            .exec(&mut c)
            .expect("ZADD");
        let moved = bc
            .run(async |c| scheduler::enqueue_due(c).await)
            .expect("enqueue_due");
        assert_eq!(moved, 1);
    }

    take(&mut fetcher);
    let (fate, filed) = fetcher.fail(&boom()).expect("fail");
    assert_eq!(fate, Fate::Exhausted { morgue: true });
    assert!(zmembers(&mut c, "retry").is_empty());
    let dead = zmembers(&mut c, "dead");
    assert_eq!(dead.len(), 1);
    assert_eq!(Some(text(&dead[0])), filed);
    assert_eq!(parse(&dead[0])["retry_count"], 2);
    assert_eq!(counter(&mut c, "stat:failed"), 3);
    fetcher.close().expect("close");
    server.stop().expect("stop");
}
