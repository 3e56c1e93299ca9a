//! Concurrency and rate limits against a real Redis (`limits/`): a job over its concurrency limit is
//! deferred and resumed, with its slot reserved, when a slot frees; a dead process's slots become
//! reservations for its recovered jobs; a raised limit lets deferred jobs go on the pump; a rate
//! limit books a later start and reschedules the job unchanged. Under a namespace, so the scripts'
//! own key names are checked too.

mod support;

use std::time::Duration;

use queue_core::client;
use queue_core::fetch::Fetcher;
use queue_core::limits::{self, Outcome, Rate, RateKind, Request};
use queue_core::link::blocking::BlockingConn;
use queue_core::server::Server;
use queue_core::Redis;

use support::*;

const IDENTITY: &str = "host:123:abcdefabcdef";
const WAIT: Duration = Duration::from_secs(5);

fn push(redis: &Redis, jobs: &[Vec<u8>]) {
    let mut bc = BlockingConn::new(redis).expect("blocking connection");
    bc.run(async |c| client::push(c, "default", jobs).await)
        .expect("push");
}

fn one_thread(redis: &Redis) -> (Server, Fetcher) {
    let mut config = server_config(IDENTITY, &[("default", 1)]);
    config.concurrency = 1;
    config.max_batch = 1;
    config.strict = true;
    let server = Server::start(redis.clone(), config).expect("server starts");
    let fetcher = server.fetcher("t1").expect("fetcher");
    (server, fetcher)
}

fn jid(n: usize) -> String {
    format!("{n:024x}")
}

fn concurrency(n: usize, cap: u64) -> Request {
    Request {
        class: "HardWorker".into(),
        jid: jid(n),
        concurrency: Some(("HardWorker".into(), cap)),
        rate: None,
    }
}

fn take(fetcher: &mut Fetcher, n: usize) {
    let got = fetcher.next(WAIT).expect("fetch").expect("a job");
    assert_eq!(text(&got.1), text(&job("default", n)));
}

#[test]
fn over_the_limit_a_job_is_deferred_and_resumes_into_the_freed_slot_ahead_of_newer_jobs() {
    let r = TestRedis::with_namespace("ns:");
    let redis = r.redis();
    let mut c = r.conn();
    let mut config = server_config(IDENTITY, &[("default", 1)]);
    config.max_batch = 1;
    config.strict = true;
    let server = Server::start(redis.clone(), config).expect("server starts");
    let (mut busy, mut other) = (
        server.fetcher("t1").expect("fetcher"),
        server.fetcher("t2").expect("fetcher"),
    );
    push(
        &redis,
        &[job("default", 1), job("default", 2), job("default", 3)],
    );

    take(&mut busy, 1);
    assert_eq!(
        busy.limit(&concurrency(1, 1)).expect("acquire"),
        Outcome::Run
    );
    take(&mut other, 2);
    assert_eq!(
        other.limit(&concurrency(2, 1)).expect("acquire"),
        Outcome::Deferred
    );
    assert_eq!(llen(&mut c, &r.key("jq:limit:wait:HardWorker")), 1);
    assert_eq!(
        hget(&mut c, &r.key("jq:limits:deferred"), "HardWorker").as_deref(),
        Some("1")
    );
    take(&mut other, 3);
    assert_eq!(
        other.limit(&concurrency(3, 1)).expect("acquire"),
        Outcome::Deferred
    );
    // Job 1 alone holds a slot, and no working list holds the deferred jobs.
    assert_eq!(
        hgetall(&mut c, &r.key("jq:limit:run:HardWorker")),
        vec![(jid(1), IDENTITY.to_owned())]
    );
    assert_eq!(llen(&mut c, &r.key("queue:default")), 0);

    // Job 1 finishes: its release (unreplied, with the ack) resumes job 2 into the slot, reserved.
    busy.done();
    wait_for("the release to resume job 2", || {
        llen(&mut c, &r.key("queue:default")) == 1
    });
    assert!(hget(&mut c, &r.key("jq:limit:run:HardWorker"), &jid(2))
        .is_some_and(|o| o.starts_with("r:")));
    take(&mut other, 2);
    assert_eq!(
        other.limit(&concurrency(2, 1)).expect("acquire"),
        Outcome::Run
    );
    assert_eq!(
        hget(&mut c, &r.key("jq:limits:running"), "HardWorker").as_deref(),
        Some("1")
    );
    // Failing gives the slot back too.
    let failure = queue_core::retry::Failure {
        error_class: "RuntimeError".into(),
        error_message: "boom".into(),
        backtrace: vec![],
        retry_in: queue_core::retry::RetryIn::Default,
        worker_retry: None,
    };
    other.fail(&failure).expect("filed");
    take(&mut busy, 3);
    assert_eq!(
        busy.limit(&concurrency(3, 1)).expect("acquire"),
        Outcome::Run
    );
    busy.done();
    busy.close().expect("close");
    other.close().expect("close");
    assert_eq!(
        hget(&mut c, &r.key("jq:limits:running"), "HardWorker").as_deref(),
        Some("0")
    );
    assert_eq!(
        hget(&mut c, &r.key("jq:limits:deferred"), "HardWorker").as_deref(),
        Some("0")
    );
    assert!(!exists(
        &mut c,
        &r.key(&format!("jq:limit:held:{IDENTITY}"))
    ));
    assert_eq!(llen(&mut c, &r.key("queue:default")), 0);
    assert_eq!(zrange_scores(&mut c, &r.key("retry")).len(), 1);
}

#[test]
fn a_zero_limit_holds_jobs_until_a_raised_limit_is_published() {
    let r = TestRedis::start();
    let redis = r.redis();
    let mut c = r.conn();
    let (_server, mut fetcher) = one_thread(&redis);
    push(&redis, &[job("default", 1), job("default", 2)]);
    for n in 1..=2 {
        take(&mut fetcher, n);
        assert_eq!(
            fetcher.limit(&concurrency(n, 0)).expect("acquire"),
            Outcome::Deferred
        );
    }
    let mut bc = BlockingConn::new(&redis).expect("blocking connection");
    let resumed = bc
        .run(async |c| limits::publish(c, &[("HardWorker".to_owned(), 5)]).await)
        .expect("publish");
    assert_eq!(resumed, 2);
    // Resumed in arrival order: job 1 is taken first.
    assert_eq!(
        queue_in_run_order(&mut c, "queue:default"),
        vec![job("default", 1), job("default", 2)]
    );
    let stats = bc.run(async |c| limits::stats(c).await).expect("stats");
    assert_eq!(
        (stats[0].limit, stats[0].running, stats[0].deferred),
        (Some(5), 2, 0)
    );
}

#[test]
fn a_dead_process_slots_are_reserved_for_its_recovered_jobs() {
    let r = TestRedis::start();
    let redis = r.redis();
    let mut c = r.conn();
    let (_server, mut fetcher) = one_thread(&redis);
    push(&redis, &[job("default", 1)]);
    take(&mut fetcher, 1);
    assert_eq!(
        fetcher.limit(&concurrency(1, 1)).expect("acquire"),
        Outcome::Run
    );
    let mut bc = BlockingConn::new(&redis).expect("blocking connection");
    let handed = bc
        .run(async |c| limits::recover(c, IDENTITY).await)
        .expect("recover");
    assert_eq!(handed, 1);
    let owner = hget(&mut c, "jq:limit:run:HardWorker", &jid(1)).expect("a slot");
    assert!(owner.starts_with("r:"), "{owner}");
    assert!(!exists(&mut c, &format!("jq:limit:held:{IDENTITY}")));
    // The (stalled, not dead) process finishing the job later frees nothing it no longer owns.
    fetcher.done();
    fetcher.close().expect("close");
    assert!(hget(&mut c, "jq:limit:run:HardWorker", &jid(1)).is_some_and(|o| o.starts_with("r:")));
}

#[test]
fn over_a_rate_limit_a_job_books_a_later_start_and_goes_to_schedule_unchanged() {
    let r = TestRedis::start();
    let redis = r.redis();
    let mut c = r.conn();
    let (_server, mut fetcher) = one_thread(&redis);
    push(
        &redis,
        &[job("default", 1), job("default", 2), job("default", 3)],
    );
    let rated = |n: usize, kind: RateKind| Request {
        class: "HardWorker".into(),
        jid: jid(n),
        concurrency: None,
        rate: Some(Rate {
            key: "HardWorker".into(),
            kind,
            count: 2,
            per: 10.0,
        }),
    };
    let mut outcomes = Vec::new();
    for n in 1..=3 {
        take(&mut fetcher, n);
        let outcome = fetcher.limit(&rated(n, RateKind::Window)).expect("acquire");
        if outcome == Outcome::Run {
            fetcher.done();
        }
        outcomes.push(outcome);
    }
    assert_eq!(outcomes[..2], [Outcome::Run, Outcome::Run]);
    let Outcome::Scheduled(at) = outcomes[2] else {
        panic!("{outcomes:?}")
    };
    let scheduled = zrange_scores(&mut c, "schedule");
    assert_eq!(scheduled.len(), 1);
    assert_eq!(text(&scheduled[0].0), text(&job("default", 3)));
    let starts = zrange_scores(&mut c, "jq:limit:rate:HardWorker");
    assert!((at - (starts[0].1 + 10.0)).abs() < 0.01, "{at} {starts:?}");
    assert!((scheduled[0].1 - at).abs() < 0.01, "{scheduled:?} {at}");
    fetcher.close().expect("close");

    // A bucket of 2: two run, the third books the token that comes 5 s later.
    let (_s2, mut f2) = {
        let mut config = server_config("host:124:abcdefabcdef", &[("b", 1)]);
        config.concurrency = 1;
        config.max_batch = 1;
        let server = Server::start(redis.clone(), config).expect("server");
        let fetcher = server.fetcher("t1").expect("fetcher");
        (server, fetcher)
    };
    let mut bc = BlockingConn::new(&redis).expect("blocking connection");
    let jobs: Vec<Vec<u8>> = (4..=6).map(|n| job("b", n)).collect();
    bc.run(async |c| client::push(c, "b", &jobs).await)
        .expect("push");
    let mut bucket = Vec::new();
    for n in 4..=6 {
        f2.next(WAIT).expect("fetch").expect("a job");
        let mut req = rated(n, RateKind::Bucket);
        req.rate.as_mut().expect("rate").key = "Bucket".into();
        let outcome = f2.limit(&req).expect("acquire");
        if outcome == Outcome::Run {
            f2.done();
        }
        bucket.push(outcome);
    }
    assert_eq!(bucket[..2], [Outcome::Run, Outcome::Run]);
    assert!(matches!(bucket[2], Outcome::Scheduled(_)), "{bucket:?}");
}

fn capped(n: usize, cap: u64) -> Request {
    Request {
        class: "Wide".into(),
        jid: jid(n),
        concurrency: Some(("Wide".into(), cap)),
        rate: None,
    }
}

fn leased_fields(c: &mut redis::Connection, lkey: &str) -> Vec<String> {
    hgetall(c, &format!("jq:limit:run:{lkey}"))
        .into_iter()
        .filter(|(f, _)| f.starts_with("L:"))
        .map(|(f, _)| f)
        .collect()
}

/// Another process (one thread, queue `b`) with job 3 waiting in its queue.
fn other_process_with_job_3(redis: &Redis) -> (Server, Fetcher) {
    let mut config = server_config("host:125:abcdefabcdef", &[("b", 1)]);
    config.concurrency = 1;
    config.max_batch = 1;
    let server = Server::start(redis.clone(), config).expect("server");
    let fetcher = server.fetcher("t1").expect("fetcher");
    let mut bc = BlockingConn::new(redis).expect("blocking connection");
    let jobs = vec![job("b", 3)];
    bc.run(async |c| client::push(c, "b", &jobs).await)
        .expect("push");
    (server, fetcher)
}

/// The limit `Wide` (16) found full by `other` (15 slots held elsewhere, one leased): its job 3 is
/// deferred, and the keeper must give the leased slot back, which resumes job 3.
fn defer_job_3_and_wait_for_the_lease(c: &mut redis::Connection, other: &mut Fetcher) {
    let fill: Vec<(String, String)> = (0..15)
        .map(|i| (format!("x{i}"), "else".to_owned()))
        .collect();
    let _: () = redis::cmd("HSET")
        .arg("jq:limit:run:Wide")
        .arg(&fill)
        .query(c)
        .expect("hset");
    other.next(WAIT).expect("fetch").expect("a job");
    assert_eq!(
        other.limit(&capped(3, 16)).expect("acquire"),
        Outcome::Deferred
    );
    wait_for("the leased slot to go back and job 3 to resume", || {
        leased_fields(c, "Wide").is_empty() && llen(c, "queue:b") == 1
    });
}

#[test]
fn a_wide_limit_leases_slots_the_next_jobs_take_in_memory_and_gives_them_back_when_jobs_wait() {
    let r = TestRedis::start();
    let redis = r.redis();
    let mut c = r.conn();
    let (_server, mut fetcher) = one_thread(&redis);
    let (_s2, mut other) = other_process_with_job_3(&redis);
    push(&redis, &[job("default", 1), job("default", 2)]);
    take(&mut fetcher, 1);
    assert_eq!(
        fetcher.limit(&capped(1, 16)).expect("acquire"),
        Outcome::Run
    );
    // Its own slot and a lease of one (the process has one thread).
    assert_eq!(leased_fields(&mut c, "Wide").len(), 1);
    assert_eq!(hgetall(&mut c, "jq:limit:run:Wide").len(), 2);
    assert_eq!(
        hget(&mut c, "jq:limits:running", "Wide").as_deref(),
        Some("2")
    );
    fetcher.done();
    take(&mut fetcher, 2);
    // The check takes a slot with HSET; the keeper's look (nothing waits) does not.
    let hsets = command_calls(&mut c, "hset");
    assert_eq!(
        fetcher.limit(&capped(2, 16)).expect("acquire"),
        Outcome::Run
    );
    fetcher.done();
    assert_eq!(command_calls(&mut c, "hset"), hsets, "taken in memory");
    assert_eq!(
        hgetall(&mut c, "jq:limit:run:Wide").len(),
        1,
        "the lease only"
    );
    // The thread, with no job left, goes back to fetching: the slot it kept for a next job of its
    // class goes back to the lease.
    assert!(fetcher
        .next(Duration::from_millis(10))
        .expect("fetch")
        .is_none());

    // Another process finds the limit full (15 slots held elsewhere): its job is deferred, and the
    // keeper gives the unused leased slot back, which resumes that job.
    defer_job_3_and_wait_for_the_lease(&mut c, &mut other);
    let owner = hget(&mut c, "jq:limit:run:Wide", &jid(3)).expect("reserved");
    assert!(owner.starts_with("r:"), "{owner}");
    assert_eq!(hgetall(&mut c, "jq:limit:run:Wide").len(), 16);
}

#[test]
fn a_kept_leased_slot_goes_back_as_a_job_of_another_class_starts() {
    let r = TestRedis::start();
    let redis = r.redis();
    let mut c = r.conn();
    let (_server, mut fetcher) = {
        let mut config = server_config(IDENTITY, &[("default", 1)]);
        config.concurrency = 1;
        config.max_batch = 10;
        let server = Server::start(redis.clone(), config).expect("server");
        let fetcher = server.fetcher("t1").expect("fetcher");
        (server, fetcher)
    };
    let (_s2, mut other) = other_process_with_job_3(&redis);
    warm_up(&redis, &mut fetcher, "default");
    let another =
        br#"{"class":"OtherWorker","args":[4],"queue":"default","jid":"000000000000000000000004"}"#;
    push(
        &redis,
        &[job("default", 1), job("default", 2), another.to_vec()],
    );
    take(&mut fetcher, 1);
    assert_eq!(
        fetcher.limit(&capped(1, 16)).expect("acquire"),
        Outcome::Run
    );
    fetcher.done();
    // Job 2, of the same class, from the buffer: its slot comes from the lease, in memory, and is
    // kept after it for a next job of the class.
    let hsets = command_calls(&mut c, "hset");
    let (_, raw) = fetcher.next_buffered().expect("job 2, buffered");
    assert_eq!(text(&raw), text(&job("default", 2)));
    assert_eq!(
        fetcher.limit(&capped(2, 16)).expect("acquire"),
        Outcome::Run
    );
    fetcher.done();
    assert_eq!(command_calls(&mut c, "hset"), hsets, "taken in memory");
    // Job 4, of another class, starts and runs on: the kept slot must not wait through it.
    let (_, raw) = fetcher.next_buffered().expect("job 4, buffered");
    assert_eq!(raw, another.to_vec());
    defer_job_3_and_wait_for_the_lease(&mut c, &mut other);
    fetcher.done();
}

#[test]
fn a_dead_process_leased_slots_are_freed_with_its_recovery() {
    let r = TestRedis::start();
    let redis = r.redis();
    let mut c = r.conn();
    let (_server, mut fetcher) = one_thread(&redis);
    push(&redis, &[job("default", 1)]);
    take(&mut fetcher, 1);
    assert_eq!(
        fetcher.limit(&capped(1, 100)).expect("acquire"),
        Outcome::Run
    );
    assert_eq!(leased_fields(&mut c, "Wide").len(), 1);
    let mut bc = BlockingConn::new(&redis).expect("blocking connection");
    let handed = bc
        .run(async |c| limits::recover(c, IDENTITY).await)
        .expect("recover");
    assert_eq!(handed, 2);
    assert!(leased_fields(&mut c, "Wide").is_empty());
    assert_eq!(
        hgetall(&mut c, "jq:limit:run:Wide").len(),
        1,
        "the job's reservation"
    );
    assert_eq!(
        hget(&mut c, "jq:limits:running", "Wide").as_deref(),
        Some("1")
    );
}

#[test]
fn leased_rate_tokens_keep_the_limit_exact() {
    for kind in [RateKind::Window, RateKind::Bucket] {
        let r = TestRedis::start();
        let redis = r.redis();
        let mut c = r.conn();
        let (_server, mut fetcher) = one_thread(&redis);
        let jobs: Vec<Vec<u8>> = (1..=130).map(|n| job("default", n)).collect();
        push(&redis, &jobs);
        let scripts = command_calls(&mut c, "evalsha");
        let mut ran = 0;
        for n in 1..=130 {
            take(&mut fetcher, n);
            let req = Request {
                class: "Rated".into(),
                jid: jid(n),
                concurrency: None,
                rate: Some(Rate {
                    key: "Rated".into(),
                    kind,
                    count: 100,
                    per: 60.0,
                }),
            };
            match fetcher.limit(&req).expect("acquire") {
                Outcome::Run => {
                    ran += 1;
                    fetcher.done();
                }
                Outcome::Scheduled(_) => {}
                other => panic!("{other:?}"),
            }
        }
        // 130 fetches, and the checks that were not covered by a lease.
        let checks = command_calls(&mut c, "evalsha") - scripts - 130;
        assert!((80..=100).contains(&ran), "{kind:?}: {ran} ran");
        assert!(checks < 100, "{kind:?}: {checks} checks for 130 jobs");
        assert_eq!(zrange_scores(&mut c, "schedule").len(), 130 - ran);
        if kind == RateKind::Window {
            let members = zrange_scores(&mut c, "jq:limit:rate:Rated");
            assert!(members.iter().any(|(m, _)| m.starts_with(b"#")));
        }
    }
}
