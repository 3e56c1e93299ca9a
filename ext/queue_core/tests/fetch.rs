//! Reliable fetch against a real Redis: push → fetch → acknowledge, queue order, giving prefetched work
//! back on close, and the idle hand-off of a job pushed while a thread waits.

mod support;

use std::sync::mpsc;
use std::time::Duration;

use queue_core::client;
use queue_core::fetch::{idle, pace, Fetcher};
use queue_core::link::blocking::BlockingConn;
use queue_core::server::Server;
use queue_core::Redis;

use support::*;

const IDENTITY: &str = "host:123:abcdefabcdef";
const WAIT: Duration = Duration::from_secs(5);

fn push(redis: &Redis, queue: &str, jobs: &[Vec<u8>]) {
    let mut bc = BlockingConn::new(redis).expect("blocking connection");
    bc.run(async |c| client::push(c, queue, jobs).await)
        .expect("push");
}

/// Takes the next job, failing the test if none comes.
fn take(fetcher: &mut Fetcher) -> (String, Vec<u8>) {
    fetcher
        .next(WAIT)
        .expect("fetch")
        .expect("a job should have been fetched")
}

/// A server with a single processor thread taking the queues in strict order, whose fetcher `t1`
/// has already timed `warm`'s jobs as quick (so it fetches that queue in batches).
fn one_thread(
    redis: &Redis,
    queues: &[(&str, u32)],
    max_batch: usize,
    warm: &str,
) -> (Server, Fetcher) {
    let mut config = server_config(IDENTITY, queues);
    config.concurrency = 1;
    config.max_batch = max_batch;
    config.strict = true;
    let server = Server::start(redis.clone(), config).expect("server starts");
    let mut fetcher = server.fetcher("t1").expect("fetcher");
    warm_up(redis, &mut fetcher, warm);
    (server, fetcher)
}

#[test]
fn pushed_jobs_come_back_in_order_byte_for_byte_and_are_acknowledged() {
    let t = TestRedis::start();
    let redis = t.redis();
    let mut c = t.conn();
    let server = Server::start(redis.clone(), server_config(IDENTITY, &[("default", 1)]))
        .expect("server starts");
    let mut fetcher = server.fetcher("t1").expect("fetcher");
    let working = redis.keys().working("default", IDENTITY, "t1");
    warm_up(&redis, &mut fetcher, "default");

    let jobs: Vec<Vec<u8>> = (1..=3).map(|n| job("default", n)).collect();
    push(&redis, "default", &jobs);
    assert_eq!(smembers(&mut c, "queues"), vec!["default"]);
    assert_eq!(queue_in_run_order(&mut c, "queue:default"), jobs);

    let (queue, raw) = take(&mut fetcher);
    assert_eq!(queue, "default");
    assert_eq!(text(&raw), text(&jobs[0]));
    // A shallow queue is shared out: with concurrency 2, one fetch takes ceil(3 / 2) = 2 jobs. Every
    // job is in exactly one of the queue or this fetcher's working list, the running one included.
    assert_eq!(lrange(&mut c, "queue:default"), vec![jobs[2].clone()]);
    let mut held = lrange(&mut c, &working);
    held.sort();
    assert_eq!(held, vec![jobs[0].clone(), jobs[1].clone()]);
    fetcher.done();

    for expected in &jobs[1..] {
        let (queue, raw) = take(&mut fetcher);
        assert_eq!(queue, "default");
        assert_eq!(text(&raw), text(expected));
        fetcher.done();
    }
    assert_eq!(fetcher.next(Duration::ZERO).expect("fetch"), None);
    fetcher.close().expect("close");

    assert_eq!(
        llen(&mut c, &working),
        0,
        "acknowledged jobs left the working list"
    );
    assert_eq!(llen(&mut c, "queue:default"), 0);
    assert_eq!(counter(&mut c, "stat:processed"), 4);
    assert_eq!(counter(&mut c, &format!("stat:processed:{}", today())), 4);
    assert_eq!(counter(&mut c, "stat:failed"), 0);
    assert_stat_expiry(
        &mut c,
        "stat:processed",
        &format!("stat:processed:{}", today()),
    );

    assert_eq!(
        server.stop().expect("stop"),
        0,
        "nothing was left to put back"
    );
    assert_eq!(
        llen(&mut c, "queue:default"),
        0,
        "no job came back after it was done"
    );
}

#[test]
fn strict_order_always_takes_from_the_first_non_empty_queue() {
    let t = TestRedis::start();
    let redis = t.redis();
    let low = job("low", 1);
    let d1 = job("default", 2);
    let d2 = job("default", 3);
    let c1 = job("critical", 4);
    let c2 = job("critical", 5);
    push(&redis, "low", std::slice::from_ref(&low));
    push(&redis, "default", &[d1.clone(), d2.clone()]);
    push(&redis, "critical", std::slice::from_ref(&c1));

    let mut config = server_config(IDENTITY, &[("critical", 1), ("default", 1), ("low", 1)]);
    config.strict = true;
    config.concurrency = 1;
    let server = Server::start(redis.clone(), config).expect("server starts");
    let mut fetcher = server.fetcher("t1").expect("fetcher");

    assert_eq!(take(&mut fetcher), ("critical".to_owned(), c1));
    fetcher.done();
    // Work arriving on a higher queue goes ahead of what was already waiting on a lower one.
    push(&redis, "critical", std::slice::from_ref(&c2));
    assert_eq!(take(&mut fetcher), ("critical".to_owned(), c2));
    fetcher.done();
    assert_eq!(take(&mut fetcher), ("default".to_owned(), d1));
    fetcher.done();
    assert_eq!(take(&mut fetcher), ("default".to_owned(), d2));
    fetcher.done();
    assert_eq!(take(&mut fetcher), ("low".to_owned(), low));
    fetcher.done();
    assert_eq!(fetcher.next(Duration::ZERO).expect("fetch"), None);
    fetcher.close().expect("close");
    server.stop().expect("stop");
}

#[test]
fn weighted_order_favours_the_heavier_queue_and_keeps_each_queue_fifo() {
    const EACH: usize = 200;
    const FETCHES: usize = 200;
    let t = TestRedis::start();
    let redis = t.redis();
    let heavy: Vec<Vec<u8>> = (0..EACH).map(|n| job("heavy", n)).collect();
    let light: Vec<Vec<u8>> = (0..EACH).map(|n| job("light", n)).collect();
    push(&redis, "heavy", &heavy);
    push(&redis, "light", &light);

    let mut config = server_config(IDENTITY, &[("heavy", 3), ("light", 1)]);
    config.concurrency = 1;
    config.max_batch = 1;
    let server = Server::start(redis.clone(), config).expect("server starts");
    let mut fetcher = server.fetcher("t1").expect("fetcher");

    let (mut from_heavy, mut from_light) = (Vec::new(), Vec::new());
    for _ in 0..FETCHES {
        let (queue, raw) = take(&mut fetcher);
        match queue.as_str() {
            "heavy" => from_heavy.push(raw),
            "light" => from_light.push(raw),
            other => panic!("job from unexpected queue {other}"),
        }
        fetcher.done();
    }
    fetcher.close().expect("close");
    server.stop().expect("stop");

    // Weight 3 against 1: the heavy queue goes first with probability 3/4, so about 150 of 200 fetches.
    // The bounds are nearly five standard deviations wide; strict order (200) or reversed weights (~50)
    // fall far outside them.
    assert!(
        (120..=180).contains(&from_heavy.len()),
        "{} of {FETCHES} fetches came from the heavy queue",
        from_heavy.len()
    );
    assert_eq!(from_heavy[..], heavy[..from_heavy.len()]);
    assert_eq!(from_light[..], light[..from_light.len()]);
}

#[test]
fn close_puts_prefetched_jobs_back_at_the_head_of_the_queue_in_order() {
    let t = TestRedis::start();
    let redis = t.redis();
    let mut c = t.conn();
    let (server, mut fetcher) = one_thread(&redis, &[("default", 1)], 5, "default");
    let working = redis.keys().working("default", IDENTITY, "t1");
    let jobs: Vec<Vec<u8>> = (1..=5).map(|n| job("default", n)).collect();
    push(&redis, "default", &jobs);

    assert_eq!(take(&mut fetcher).1, jobs[0]);
    assert_eq!(
        llen(&mut c, &working),
        5,
        "the whole batch is held in the working list"
    );
    assert_eq!(llen(&mut c, "queue:default"), 0);
    // A job pushed meanwhile must run after the prefetched ones that go back.
    let later = job("default", 6);
    push(&redis, "default", std::slice::from_ref(&later));

    fetcher.done();
    fetcher.close().expect("close");

    let mut expected: Vec<Vec<u8>> = jobs[1..].to_vec();
    expected.push(later.clone());
    assert_eq!(
        queue_in_run_order(&mut c, "queue:default")
            .iter()
            .map(|j| text(j))
            .collect::<Vec<_>>(),
        expected.iter().map(|j| text(j)).collect::<Vec<_>>()
    );
    assert_eq!(llen(&mut c, &working), 0);
    assert_eq!(counter(&mut c, "stat:processed"), 2);

    let mut next = server.fetcher("t2").expect("second fetcher");
    for want in &expected {
        assert_eq!(&take(&mut next).1, want);
        next.done();
    }
    next.close().expect("close");
    assert_eq!(counter(&mut c, "stat:processed"), 7);
    server.stop().expect("stop");
}

#[test]
fn a_waiting_fetcher_receives_a_job_pushed_while_it_waits() {
    let t = TestRedis::start();
    let redis = t.redis();
    let mut c = t.conn();
    let server = Server::start(redis.clone(), server_config(IDENTITY, &[("default", 1)]))
        .expect("server starts");
    let mut fetcher = server.fetcher("t1").expect("fetcher");

    let (got_tx, got_rx) = mpsc::channel();
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let waiter = std::thread::spawn(move || {
        let got = fetcher.next(WAIT).map_err(|e| e.to_string());
        got_tx.send(got).expect("report the fetch");
        // Hold the job until the test has looked at where it sits.
        go_rx.recv().expect("go-ahead");
        fetcher.done();
        fetcher.close().map_err(|e| e.to_string())
    });

    // The idle waiter blocks on the queue only while a thread is parked: once Redis reports a blocked
    // client, the fetcher has found the queue empty and is waiting.
    wait_for("the idle waiter to block on the empty queue", || {
        blocked_clients(&mut c) >= 1
    });
    assert_eq!(llen(&mut c, "queue:default"), 0);
    let pushed = job("default", 1);
    push(&redis, "default", std::slice::from_ref(&pushed));

    let got = got_rx
        .recv_timeout(EVENT_TIMEOUT)
        .expect("the waiting fetcher returned");
    assert_eq!(
        got.expect("fetch"),
        Some(("default".to_owned(), pushed.clone())),
        "the job pushed during the wait reached the waiting fetcher"
    );
    // It travelled through the idle waiter's working list, where it stays until acknowledged.
    let idle_list = redis.keys().working("default", IDENTITY, idle::SLOT);
    assert_eq!(lrange(&mut c, &idle_list), vec![pushed]);

    go_tx.send(()).expect("let the fetcher finish");
    waiter
        .join()
        .expect("fetcher thread")
        .expect("fetcher closed");
    assert_eq!(llen(&mut c, &idle_list), 0, "the ack removed it");
    assert_eq!(counter(&mut c, "stat:processed"), 1);
    server.stop().expect("stop");
    assert_eq!(llen(&mut c, "queue:default"), 0);
}

#[test]
fn an_idle_thread_takes_unstarted_jobs_from_a_siblings_batch() {
    let t = TestRedis::start();
    let redis = t.redis();
    let mut c = t.conn();
    // Concurrency 1 makes a fetch take the whole shallow queue into t1's batch.
    let mut config = server_config(IDENTITY, &[("default", 1)]);
    config.concurrency = 1;
    let server = Server::start(redis.clone(), config).expect("server starts");
    let mut busy = server.fetcher("t1").expect("fetcher t1");
    let mut idle = server.fetcher("t2").expect("fetcher t2");
    let t1_working = redis.keys().working("default", IDENTITY, "t1");
    warm_up(&redis, &mut busy, "default");
    let jobs: Vec<Vec<u8>> = (1..=4).map(|n| job("default", n)).collect();
    push(&redis, "default", &jobs);

    assert_eq!(text(&take(&mut busy).1), text(&jobs[0]));
    assert_eq!(llen(&mut c, "queue:default"), 0, "t1 holds the whole batch");

    // t2 finds the queue empty and takes t1's newest unstarted job instead of waiting.
    let (_, stolen) = take(&mut idle);
    assert_eq!(text(&stolen), text(&jobs[3]));
    idle.done();
    idle.close().expect("close t2"); // writes t2's ack against t1's working list
    let mut held = lrange(&mut c, &t1_working);
    held.sort();
    assert_eq!(
        held,
        vec![jobs[0].clone(), jobs[1].clone(), jobs[2].clone()]
    );

    // t1 runs the rest of its batch, oldest first, without the stolen job.
    busy.done();
    assert_eq!(text(&take(&mut busy).1), text(&jobs[1]));
    busy.done();
    assert_eq!(text(&take(&mut busy).1), text(&jobs[2]));
    busy.done();
    busy.close().expect("close t1");
    assert_eq!(llen(&mut c, &t1_working), 0);
    assert_eq!(counter(&mut c, "stat:processed"), 5);
}

#[test]
fn close_puts_back_a_started_job_that_was_never_settled() {
    let t = TestRedis::start();
    let redis = t.redis();
    let mut c = t.conn();
    let jobs: Vec<Vec<u8>> = (1..=2).map(|n| job("default", n)).collect();
    push(&redis, "default", &jobs);
    let server = Server::start(redis.clone(), server_config(IDENTITY, &[("default", 1)]))
        .expect("server starts");
    let mut fetcher = server.fetcher("t1").expect("fetcher");

    take(&mut fetcher); // started, then its thread dies: neither done nor fail
    fetcher.close().expect("close");

    assert_eq!(
        llen(&mut c, &redis.keys().working("default", IDENTITY, "t1")),
        0
    );
    assert_eq!(queue_in_run_order(&mut c, "queue:default"), jobs);
    assert_eq!(counter(&mut c, "stat:processed"), 0);
}

#[test]
fn an_untimed_queue_is_fetched_one_job_at_a_time() {
    let t = TestRedis::start();
    let redis = t.redis();
    let mut c = t.conn();
    let mut config = server_config(IDENTITY, &[("default", 1)]);
    config.concurrency = 1;
    let server = Server::start(redis.clone(), config).expect("server starts");
    let mut fetcher = server.fetcher("t1").expect("fetcher");
    let jobs: Vec<Vec<u8>> = (1..=5).map(|n| job("default", n)).collect();
    push(&redis, "default", &jobs);

    assert_eq!(take(&mut fetcher).1, jobs[0]);
    assert_eq!(
        llen(&mut c, "queue:default"),
        4,
        "nothing is known of the jobs yet"
    );
    fetcher.done();
    // Timed now (a quick job): the next fetch takes the rest.
    assert_eq!(take(&mut fetcher).1, jobs[1]);
    assert_eq!(llen(&mut c, "queue:default"), 0);
    fetcher.close().expect("close");
    server.stop().expect("stop");
}

#[test]
fn a_finished_job_is_acknowledged_before_the_next_call() {
    let t = TestRedis::start();
    let redis = t.redis();
    let mut c = t.conn();
    let (server, mut fetcher) = one_thread(&redis, &[("default", 1)], 10, "default");
    let working = redis.keys().working("default", IDENTITY, "t1");
    let jobs: Vec<Vec<u8>> = (1..=3).map(|n| job("default", n)).collect();
    push(&redis, "default", &jobs);

    assert_eq!(take(&mut fetcher).1, jobs[0]);
    assert_eq!(llen(&mut c, &working), 3, "the batch is held");
    // `done` only writes: no further call of the fetcher is needed for Redis to drop the job, so a
    // process killed now would not run it again.
    fetcher.done();
    wait_for("the acknowledgement to reach Redis", || {
        llen(&mut c, &working) == 2
    });
    let mut held = lrange(&mut c, &working);
    held.sort();
    assert_eq!(held, vec![jobs[1].clone(), jobs[2].clone()]);
    // The reply was switched off: the connection is still in step for the next call.
    assert_eq!(take(&mut fetcher).1, jobs[1]);
    fetcher.done();
    assert_eq!(take(&mut fetcher).1, jobs[2]);
    fetcher.done();
    assert_eq!(fetcher.next(Duration::ZERO).expect("fetch"), None);
    assert_eq!(llen(&mut c, &working), 0);
    assert_eq!(counter(&mut c, "stat:processed"), 4);
    fetcher.close().expect("close");
    server.stop().expect("stop");
}

#[test]
fn an_aged_batch_hands_its_unstarted_jobs_back_when_a_higher_queue_has_work() {
    let t = TestRedis::start();
    let redis = t.redis();
    let mut c = t.conn();
    let (server, mut fetcher) =
        one_thread(&redis, &[("critical", 1), ("default", 1)], 10, "default");
    let default_working = redis.keys().working("default", IDENTITY, "t1");
    let jobs: Vec<Vec<u8>> = (1..=4).map(|n| job("default", n)).collect();
    push(&redis, "default", &jobs);

    assert_eq!(take(&mut fetcher).1, jobs[0]);
    assert_eq!(llen(&mut c, &default_working), 4, "a batch of four");
    let urgent = job("critical", 9);
    push(&redis, "critical", std::slice::from_ref(&urgent));
    // The running job takes longer than a batch may age before the higher queues are looked at.
    std::thread::sleep(pace::LOOK_UP_AFTER * 2);
    fetcher.done();

    assert_eq!(take(&mut fetcher), ("critical".to_owned(), urgent));
    // The three unstarted jobs went back to the head of their queue, in their order; the one that
    // ran was acknowledged.
    assert_eq!(llen(&mut c, &default_working), 0);
    assert_eq!(
        queue_in_run_order(&mut c, "queue:default"),
        jobs[1..].to_vec()
    );
    fetcher.done();
    for want in &jobs[1..] {
        assert_eq!(take(&mut fetcher), ("default".to_owned(), want.clone()));
        fetcher.done();
    }
    fetcher.close().expect("close");
    server.stop().expect("stop");
    assert_eq!(counter(&mut c, "stat:processed"), 6);
}
