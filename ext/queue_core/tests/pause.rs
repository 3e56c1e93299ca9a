//! Queue pausing against a real Redis: a batch fetch skips a paused queue, an idle waiter blocked on
//! it is ended and not re-armed, prefetched jobs go back to the head of their queue, and an ordered
//! queue pauses too. Unpausing lets each of them take the queue again.

mod support;

use std::sync::mpsc;
use std::time::{Duration, Instant};

use queue_core::client;
use queue_core::fetch::Fetcher;
use queue_core::link::blocking::{BlockingConn, SyncConn};
use queue_core::ordered::fetch::{OrderedFetcher, Scheduler};
use queue_core::ordered::lease::{Ownership, Splitter};
use queue_core::ordered::push::{push as ordered_push, NewJob};
use queue_core::ordered::OrderedQueue;
use queue_core::pause;
use queue_core::server::Server;
use queue_core::Redis;

use support::*;

const IDENTITY: &str = "host:123:abcdefabcdef";
const WAIT: Duration = Duration::from_secs(5);
/// What the issue promises: every process stops fetching a paused queue within a second.
const BOUND: Duration = Duration::from_secs(1);

fn push(redis: &Redis, queue: &str, jobs: &[Vec<u8>]) {
    let mut bc = BlockingConn::new(redis).expect("blocking connection");
    bc.run(async |c| client::push(c, queue, jobs).await)
        .expect("push");
}

fn set_paused(redis: &Redis, queue: &str, paused: bool) -> bool {
    let mut bc = BlockingConn::new(redis).expect("blocking connection");
    bc.run(async |c| {
        if paused {
            pause::pause(c, queue).await
        } else {
            pause::unpause(c, queue).await
        }
    })
    .expect("pause or unpause")
}

fn paused_names(redis: &Redis) -> Vec<String> {
    let mut bc = BlockingConn::new(redis).expect("blocking connection");
    bc.run(async |c| pause::paused(c).await).expect("paused")
}

fn one_thread(redis: &Redis, queues: &[(&str, u32)], max_batch: usize) -> (Server, Fetcher) {
    let mut config = server_config(IDENTITY, queues);
    config.concurrency = 1;
    config.max_batch = max_batch;
    config.strict = true;
    let server = Server::start(redis.clone(), config).expect("server starts");
    let fetcher = server.fetcher("t1").expect("fetcher");
    (server, fetcher)
}

#[test]
fn the_paused_set_is_namespaced_and_pausing_twice_changes_nothing() {
    let t = TestRedis::with_namespace("resque:gitlab:");
    let redis = t.redis();
    assert!(set_paused(&redis, "mail", true));
    assert!(!set_paused(&redis, "mail", true));
    assert!(set_paused(&redis, "alpha", true));
    assert_eq!(paused_names(&redis), vec!["alpha", "mail"]);
    assert_eq!(
        smembers(&mut t.conn(), "resque:gitlab:jq:paused"),
        vec!["alpha", "mail"]
    );
    assert!(set_paused(&redis, "mail", false));
    assert!(!set_paused(&redis, "mail", false));
    assert_eq!(paused_names(&redis), vec!["alpha"]);
}

#[test]
fn a_fetch_skips_a_paused_queue_and_takes_it_again_once_unpaused() {
    let t = TestRedis::start();
    let redis = t.redis();
    let mut c = t.conn();
    let (server, mut fetcher) = one_thread(&redis, &[("a", 1), ("b", 1)], 10);
    let a: Vec<Vec<u8>> = (1..=2).map(|n| job("a", n)).collect();
    let b = job("b", 3);
    push(&redis, "a", &a);
    push(&redis, "b", std::slice::from_ref(&b));

    assert!(set_paused(&redis, "a", true));
    // The script reads the paused set itself: the very next fetch skips `a`, though it comes first.
    let got = fetcher.next(Duration::ZERO).expect("fetch");
    assert_eq!(got, Some(("b".to_owned(), b)));
    fetcher.done();
    assert_eq!(fetcher.next(Duration::ZERO).expect("fetch"), None);
    assert_eq!(queue_in_run_order(&mut c, "queue:a"), a, "a's jobs wait");

    // A thread that found nothing parks, and the idle waiter brings it `a`'s jobs once unpaused.
    assert!(set_paused(&redis, "a", false));
    for expected in &a {
        let got = fetcher.next(WAIT).expect("fetch");
        assert_eq!(got, Some(("a".to_owned(), expected.clone())));
        fetcher.done();
    }
    fetcher.close().expect("close");
    server.stop().expect("stop");
}

#[test]
fn pausing_ends_an_idle_wait_within_a_second_and_unpausing_resumes_it() {
    let t = TestRedis::start();
    let redis = t.redis();
    let mut c = t.conn();
    let (server, mut fetcher) = one_thread(&redis, &[("a", 1)], 10);

    let (got_tx, got_rx) = mpsc::channel();
    let (go_tx, go_rx) = mpsc::channel::<Duration>();
    let thread = std::thread::spawn(move || {
        // Parked twice: while paused (the wait runs out with nothing), then after the unpause.
        while let Ok(wait) = go_rx.recv() {
            let got = fetcher.next(wait).map_err(|e| e.to_string());
            if matches!(got, Ok(Some(_))) {
                fetcher.done();
            }
            got_tx.send(got).expect("report the fetch");
        }
        fetcher.close().map_err(|e| e.to_string())
    });
    go_tx.send(Duration::from_secs(3)).expect("park");
    wait_for("the idle waiter to block on the empty queue", || {
        blocked_clients(&mut c) >= 1
    });

    let paused_at = Instant::now();
    set_paused(&redis, "a", true);
    wait_for("the idle waiter's BLMOVE to end", || {
        blocked_clients(&mut c) == 0
    });
    let stopped = paused_at.elapsed();
    eprintln!("idle waiter unblocked {stopped:?} after the pause");
    assert!(stopped <= BOUND, "took {stopped:?}");
    assert_eq!(server.paused(), vec!["a"]);

    // A push lands and waits: the parked thread's wait runs out with nothing.
    let pushed = job("a", 1);
    push(&redis, "a", std::slice::from_ref(&pushed));
    let got = got_rx.recv_timeout(EVENT_TIMEOUT).expect("the wait ended");
    assert_eq!(got, Ok(None));
    assert_eq!(lrange(&mut c, "queue:a"), vec![pushed.clone()]);

    go_tx.send(WAIT).expect("park again");
    let unpaused_at = Instant::now();
    set_paused(&redis, "a", false);
    let got = got_rx.recv_timeout(EVENT_TIMEOUT).expect("a job came");
    let resumed = unpaused_at.elapsed();
    eprintln!("parked thread got the waiting job {resumed:?} after the unpause");
    assert_eq!(got, Ok(Some(("a".to_owned(), pushed))));
    assert!(resumed <= BOUND, "took {resumed:?}");

    drop(go_tx);
    thread.join().expect("thread").expect("close");
    server.stop().expect("stop");
    assert_eq!(llen(&mut c, "queue:a"), 0);
}

#[test]
fn a_fetcher_hands_the_unstarted_jobs_of_a_paused_queue_back_in_order() {
    let t = TestRedis::start();
    let redis = t.redis();
    let mut c = t.conn();
    let (server, mut fetcher) = one_thread(&redis, &[("a", 1)], 10);
    warm_up(&redis, &mut fetcher, "a");
    let jobs: Vec<Vec<u8>> = (1..=5).map(|n| job("a", n)).collect();
    push(&redis, "a", &jobs);
    let got = fetcher.next(WAIT).expect("fetch");
    assert_eq!(got, Some(("a".to_owned(), jobs[0].clone())));
    assert_eq!(llen(&mut c, "queue:a"), 0, "one batch took them all");

    set_paused(&redis, "a", true);
    wait_for("the server to see the pause", || server.paused() == ["a"]);
    // The running job finishes; the next one does not start: the rest go back, next-to-run first.
    fetcher.done();
    assert_eq!(fetcher.next_buffered(), None);
    assert_eq!(fetcher.next(Duration::ZERO).expect("fetch"), None);
    assert_eq!(queue_in_run_order(&mut c, "queue:a"), jobs[1..].to_vec());
    let working = redis.keys().working("a", IDENTITY, "t1");
    assert_eq!(llen(&mut c, &working), 0);

    set_paused(&redis, "a", false);
    wait_for("the server to see the unpause", || {
        server.paused().is_empty()
    });
    // They run again (the parked thread's first comes through the idle waiter, which may take a
    // second one for the hand-off while the thread fetches the rest: the order is not kept here).
    let mut ran = Vec::new();
    for _ in &jobs[1..] {
        let (queue, raw) = fetcher.next(WAIT).expect("fetch").expect("a job");
        assert_eq!(queue, "a");
        ran.push(raw);
        fetcher.done();
    }
    ran.sort();
    assert_eq!(ran, jobs[1..].to_vec());
    fetcher.close().expect("close");
    server.stop().expect("stop");
}

#[test]
fn an_ordered_queue_pauses_too() {
    let t = TestRedis::start();
    let redis = t.redis();
    let q = OrderedQueue::new("", "OrderedWorker", 2).expect("queue");
    let mut conn = SyncConn::new(&redis);
    let mut own = Ownership::new(q.clone(), IDENTITY, Splitter::Default).expect("owner");
    own.balance(&mut conn).expect("balance");
    let job = NewJob {
        id: "a".to_owned(),
        payload: b"a1".to_vec(),
        score: 1.0,
        perform_in: 1.0,
    };
    ordered_push(&mut conn, &q, &[job]).expect("push");
    let mut f = OrderedFetcher::new(q, IDENTITY, Scheduler::Lag, 1).expect("fetcher");

    set_paused(&redis, "OrderedWorker", true);
    assert_eq!(f.fetch(&mut conn, &own.fetchable()).expect("fetch"), None);
    let (_, batch) = f
        .settle_and_fetch(&mut conn, None, 25, &own.fetchable())
        .expect("settle and fetch");
    assert_eq!(batch, None);

    set_paused(&redis, "OrderedWorker", false);
    let batch = f
        .fetch(&mut conn, &own.fetchable())
        .expect("fetch")
        .expect("the id, once unpaused");
    assert_eq!(batch.jobs[0].id, "a");
}
