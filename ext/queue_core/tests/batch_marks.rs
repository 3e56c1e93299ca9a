//! A batch's dirty mark, owed (`fetch/fetcher/owed.rs`), with a real server and Redis: a thread
//! draining a batch marks it once per buffer, not once per job, and the checker still counts every
//! job; while a mark is owed, a job of its batch stays in the working list, so a `kill -9` there
//! leaves a job whose ack marks the batch after recovery.

mod support;

use std::time::Duration;

use queue_core::fetch::Fetcher;
use queue_core::link::blocking::SyncConn;
use queue_core::server::Server;
use queue_core::Redis;

use support::*;

const IDENTITY: &str = "host:321:abcdefabcdef";
const WAIT: Duration = Duration::from_secs(5);

/// A server of one thread on queue `work`, its fetcher `t1` warmed up (so its pace takes a whole
/// batch at once), and batch `bid` of `n` jobs pushed.
struct Setup {
    /// Bound by name where it is taken apart (`_` or `..` would drop it, and stop the server).
    redis_server: TestRedis,
    redis: Redis,
    c: redis::Connection,
    server: Server,
    fetcher: Fetcher,
    jobs: Vec<Vec<u8>>,
}

fn setup(bid: &str, n: usize) -> Setup {
    let t = TestRedis::start();
    let redis = t.redis();
    let c = t.conn();
    let mut config = server_config(IDENTITY, &[("work", 1)]);
    config.concurrency = 1;
    config.max_batch = 100;
    let server = Server::start(redis.clone(), config).expect("server starts");
    let mut fetcher = server.fetcher("t1").expect("fetcher");
    warm_up(&redis, &mut fetcher, "work");
    let jobs: Vec<Vec<u8>> = (1..=n)
        .map(|i| {
            format!(
                r#"{{"class":"W","args":[],"queue":"work","jid":"{bid}-{i:04}","bid":"{bid}"}}"#
            )
            .into_bytes()
        })
        .collect();
    pushed_batch(&mut SyncConn::new(&redis), bid, &jobs);
    Setup {
        redis_server: t,
        redis,
        c,
        server,
        fetcher,
        jobs,
    }
}

fn pending(c: &mut redis::Connection, bid: &str) -> Option<String> {
    redis::cmd("HGET")
        .arg(format!("jq:batch:{bid}"))
        .arg("pending")
        .query(c)
        .expect("hget")
}

#[test]
fn a_thread_draining_a_batch_marks_it_once_per_buffer_and_every_job_is_counted() {
    let Setup {
        redis_server: _alive,
        mut c,
        server,
        mut fetcher,
        jobs,
        ..
    } = setup("b1", 40);
    let _: () = redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .query(&mut c)
        .expect("resetstat");

    let mut ran = Vec::new();
    while ran.len() < jobs.len() {
        let (_, raw) = fetcher.next(WAIT).expect("fetch").expect("a job");
        ran.push(raw);
        fetcher.done();
        // The fast path, as the binding's loop takes it.
        while let Some((_, raw)) = fetcher.next_buffered() {
            ran.push(raw);
            fetcher.done();
        }
    }
    ran.sort();
    assert_eq!(ran, jobs);
    // Nothing left: the owed mark goes out before the thread waits.
    assert_eq!(fetcher.next(Duration::ZERO).expect("fetch"), None);
    wait_for("the checker to count every job", || {
        pending(&mut c, "b1").as_deref() == Some("0")
    });
    let sadds = command_calls(&mut c, "sadd");
    eprintln!("{} jobs acknowledged with {sadds} SADDs", jobs.len());
    // One SADD per jid, and a mark per buffer: the batches the fetcher took grow with its pace, and
    // the last job of each marks. One mark per job would make it 80.
    let marks = sadds - 40;
    assert!((1..=10).contains(&marks), "{sadds} SADDs");
    fetcher.close().expect("close");
    server.stop().expect("stop");
}

#[test]
fn while_a_mark_is_owed_a_job_of_its_batch_stays_in_the_working_list() {
    let Setup {
        redis_server: _alive,
        redis,
        mut c,
        server,
        mut fetcher,
        jobs,
    } = setup("b2", 2);
    let (_, first) = fetcher.next(WAIT).expect("fetch").expect("a job");
    assert_eq!(first, jobs[0]);
    fetcher.done();
    let working = redis.keys().working("work", IDENTITY, "t1");
    // The ack reaches Redis (the kernel holds it ~200 ms at most); the mark does not.
    wait_for("the first ack", || llen(&mut c, &working) == 1);
    assert_eq!(smembers(&mut c, "jq:batch:b2:ok"), vec!["b2-0001"]);
    assert!(
        smembers(&mut c, "jq:batch-dirty").is_empty(),
        "the mark is owed"
    );
    assert_eq!(lrange(&mut c, &working), vec![jobs[1].clone()]);

    // A sibling thread finds nothing to steal: the job that owes the mark stays with its fetcher.
    let mut sibling = server.fetcher("t2").expect("sibling");
    assert_eq!(sibling.next(Duration::ZERO).expect("fetch"), None);

    // `kill -9` now: the fetcher never runs again (its socket is left open, as a dead process's
    // is until the kernel closes it). Recovery puts the job of the working list back on its queue;
    // whoever runs it marks the batch, and the checker counts both jobs.
    std::mem::forget(fetcher);
    let back: Vec<u8> = redis::cmd("LMOVE")
        .arg(&working)
        .arg("queue:work")
        .arg("LEFT")
        .arg("RIGHT")
        .query(&mut c)
        .expect("requeue");
    assert_eq!(back, jobs[1]);
    let (_, second) = sibling.next(WAIT).expect("fetch").expect("the job again");
    assert_eq!(second, jobs[1]);
    sibling.done();
    assert_eq!(sibling.next(Duration::ZERO).expect("fetch"), None);
    wait_for("the checker to count both jobs", || {
        pending(&mut c, "b2").as_deref() == Some("0")
    });
    sibling.close().expect("close");
    server.stop().expect("stop");
}
