//! Crash safety against a real Redis: the jobs a killed process held (running or prefetched) go back to
//! their queue, in order, once another process sees it has stopped beating; live processes keep theirs.

mod support;

use std::time::Duration;

use queue_core::client;
use queue_core::fetch::{FetchShared, Fetcher, QueueOrder};
use queue_core::link::blocking::BlockingConn;
use queue_core::liveness;
use queue_core::server::Server;
use queue_core::Redis;

use support::*;

const DEAD: &str = "host-a:111:aaaaaaaaaaaa";
const LIVE: &str = "host-b:222:bbbbbbbbbbbb";

fn push(redis: &Redis, queue: &str, jobs: &[Vec<u8>]) {
    let mut bc = BlockingConn::new(redis).expect("blocking connection");
    bc.run(async |c| client::push(c, queue, jobs).await)
        .expect("push");
}

/// Makes `identity`'s last liveness beat older than any death threshold, as if it had been silent for
/// a long time. Fails if the process never beat.
fn silence(t: &TestRedis, identity: &str) {
    let mut c = t.conn();
    let alive = t.key("jq:alive");
    let score: Option<f64> = redis::cmd("ZSCORE")
        .arg(&alive)
        .arg(identity)
        .query(&mut c)
        .expect("ZSCORE");
    assert!(score.is_some(), "{identity} never recorded a liveness beat");
    redis::cmd("ZADD")
        .arg(&alive)
        .arg("XX")
        .arg(0)
        .arg(identity)
        .exec(&mut c)
        .expect("ZADD");
}

#[test]
fn jobs_of_a_killed_process_go_back_to_their_queue_in_order() {
    let t = TestRedis::start();
    let redis = t.redis();
    let mut c = t.conn();
    let server = Server::start(redis.clone(), server_config(DEAD, &[("default", 1)]))
        .expect("first server starts");
    let mut fetcher = server.fetcher("t1").expect("fetcher");
    warm_up(&redis, &mut fetcher, "default");
    let jobs: Vec<Vec<u8>> = (1..=6).map(|n| job("default", n)).collect();
    push(&redis, "default", &jobs);
    let (_, running) = fetcher
        .next(Duration::from_secs(5))
        .expect("fetch")
        .expect("a job");
    assert_eq!(running, jobs[0]);
    let working = redis.keys().working("default", DEAD, "t1");
    assert_eq!(
        llen(&mut c, &working),
        3,
        "one running and two prefetched jobs"
    );
    assert_eq!(llen(&mut c, "queue:default"), 3);

    // kill -9: nothing of the process runs again, no close, no stop, no clean-up.
    std::mem::forget(fetcher);
    drop(server);
    assert_eq!(
        llen(&mut c, &working),
        3,
        "a crash leaves the held jobs where they were"
    );
    silence(&t, DEAD);

    // The next process to beat sees the silent one and takes its work back before taking any itself.
    let survivor = Server::start(redis.clone(), server_config(LIVE, &[("default", 1)]))
        .expect("second server starts");
    assert_eq!(
        queue_in_run_order(&mut c, "queue:default")
            .iter()
            .map(|j| text(j))
            .collect::<Vec<_>>(),
        jobs.iter().map(|j| text(j)).collect::<Vec<_>>(),
        "every job is back, the recovered ones first, in their original order"
    );
    assert_eq!(llen(&mut c, &working), 0);
    assert!(!exists(&mut c, &redis.keys().working_index(DEAD)));
    let alive: Vec<String> = redis::cmd("ZRANGE")
        .arg("jq:alive")
        .arg(0)
        .arg(-1)
        .query(&mut c)
        .expect("ZRANGE");
    assert_eq!(alive, vec![LIVE.to_owned()]);

    let mut fetcher = survivor.fetcher("t1").expect("fetcher");
    for want in &jobs {
        let (_, raw) = fetcher
            .next(Duration::from_secs(5))
            .expect("fetch")
            .expect("a job");
        assert_eq!(&raw, want);
        fetcher.done();
    }
    fetcher.close().expect("close");
    survivor.stop().expect("stop");
    assert_eq!(llen(&mut c, "queue:default"), 0);
    assert_eq!(counter(&mut c, "stat:processed"), 7);
}

#[test]
fn recovery_takes_only_silent_processes_and_moves_each_job_once() {
    let t = TestRedis::start();
    let redis = t.redis();
    let mut c = t.conn();
    let mut bc = BlockingConn::new(&redis).expect("blocking connection");

    // Two processes with a fetcher each. Concurrency 2 shares the queue out: the first fetch takes
    // ceil(4 / 2) = 2 jobs, the second ceil(2 / 2) = 1.
    let order = || QueueOrder::new(vec![("default".to_owned(), 1)], true).expect("queue order");
    let dead = FetchShared::new(redis.clone(), DEAD, order(), 2, 10);
    let live = FetchShared::new(redis.clone(), LIVE, order(), 2, 10);
    let mut dead_fetcher = Fetcher::new(dead.clone(), "t1").expect("fetcher");
    let mut live_fetcher = Fetcher::new(live.clone(), "t1").expect("fetcher");
    for shared in [&dead, &live] {
        let lists = shared.working_lists();
        let seen = bc
            .run(async |c| liveness::beat(c, Some(&shared.identity), &lists).await)
            .expect("beat");
        assert!(seen.is_empty(), "nobody is silent yet: {seen:?}");
    }
    warm_up(&redis, &mut dead_fetcher, "default");
    warm_up(&redis, &mut live_fetcher, "default");
    let jobs: Vec<Vec<u8>> = (1..=4).map(|n| job("default", n)).collect();
    push(&redis, "default", &jobs);
    assert_eq!(
        dead_fetcher.next(Duration::ZERO).expect("fetch").unwrap().1,
        jobs[0]
    );
    assert_eq!(
        live_fetcher.next(Duration::ZERO).expect("fetch").unwrap().1,
        jobs[2]
    );
    std::mem::forget(dead_fetcher);
    let dead_list = redis.keys().working("default", DEAD, "t1");
    let live_list = redis.keys().working("default", LIVE, "t1");
    assert_eq!(llen(&mut c, &dead_list), 2);
    assert_eq!(lrange(&mut c, &live_list), vec![jobs[2].clone()]);

    silence(&t, DEAD);
    let seen = bc
        .run(async |c| liveness::beat(c, None, &[]).await)
        .expect("look");
    assert_eq!(
        seen,
        vec![DEAD.to_owned()],
        "only the silent process is dead"
    );

    let moved = bc
        .run(async |c| liveness::recover(c, DEAD).await)
        .expect("recover");
    assert_eq!(moved, 2);
    assert_eq!(
        queue_in_run_order(&mut c, "queue:default"),
        vec![jobs[0].clone(), jobs[1].clone(), jobs[3].clone()],
        "the dead process's jobs run next, in their original order"
    );
    assert_eq!(llen(&mut c, &dead_list), 0);
    assert_eq!(
        lrange(&mut c, &live_list),
        vec![jobs[2].clone()],
        "a live process keeps its work"
    );

    let again = bc
        .run(async |c| liveness::recover(c, DEAD).await)
        .expect("recover again");
    assert_eq!(again, 0, "a second recovery finds nothing to move");
    assert_eq!(llen(&mut c, "queue:default"), 3, "no job was duplicated");
    let seen = bc
        .run(async |c| liveness::beat(c, None, &[]).await)
        .expect("look");
    assert!(
        seen.is_empty(),
        "a recovered process is forgotten: {seen:?}"
    );

    live_fetcher.done();
    live_fetcher.close().expect("close");
    assert_eq!(llen(&mut c, &live_list), 0);
    assert_eq!(counter(&mut c, "stat:processed"), 3);
}
