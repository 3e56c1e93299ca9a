//! Capsules against a real Redis (`queue_core::capsules`): a server's extra capsules hand their
//! threads only their own queues' jobs, their idle waiters park in working lists of their own slot,
//! and a stop puts back what any capsule held.

mod support;

use std::time::Duration;

use queue_core::capsules::CapsuleConfig;
use queue_core::link::blocking::BlockingConn;
use queue_core::server::{Server, ServerConfig};
use queue_core::{client, Redis};

use support::*;

const IDENTITY: &str = "host:9:capsulecapsul";

fn push(redis: &Redis, queue: &str, jobs: &[Vec<u8>]) {
    let mut bc = BlockingConn::new(redis).expect("blocking connection");
    bc.run(async |c| client::push(c, queue, jobs).await)
        .expect("push");
}

fn config() -> ServerConfig {
    ServerConfig {
        capsules: vec![CapsuleConfig {
            name: "single".to_owned(),
            queues: vec![("single".to_owned(), 1), ("default".to_owned(), 1)],
            strict: true,
            concurrency: 1,
        }],
        ..server_config(IDENTITY, &[("default", 1)])
    }
}

#[test]
fn each_capsule_fetches_only_its_queues() {
    let t = TestRedis::start();
    let redis = t.redis();
    let mut c = t.conn();
    let server = Server::start(redis.clone(), config()).expect("server starts");
    assert!(
        server.fetcher_in(2, "nope").is_err(),
        "there is no capsule 2"
    );

    push(&redis, "single", &[job("single", 1)]);
    push(&redis, "default", &[job("default", 2)]);
    let mut default = server.fetcher("d1").expect("default fetcher");
    let (queue, raw) = default
        .next(Duration::from_secs(5))
        .expect("fetch")
        .expect("a job");
    assert_eq!((queue.as_str(), raw), ("default", job("default", 2)));
    assert_eq!(
        llen(&mut c, "queue:single"),
        1,
        "the default capsule never takes the single capsule's queue"
    );
    let mut single = server.fetcher_in(1, "s1").expect("single fetcher");
    let (queue, raw) = single
        .next(Duration::from_secs(5))
        .expect("fetch")
        .expect("a job");
    assert_eq!((queue.as_str(), raw), ("single", job("single", 1)));

    // An idle thread of the single capsule is woken by a push to its queue, through its own
    // capsule's idle waiter, whose working lists are of slot `idle-single` (the default capsule's
    // waiter on `default` uses slot `idle`: the two never share a list).
    single.done();
    let pushed = job("single", 3);
    let redis2 = redis.clone();
    let pusher = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(300));
        push(&redis2, "single", &[job("single", 3)]);
    });
    let (_, raw) = single
        .next(Duration::from_secs(5))
        .expect("fetch")
        .expect("the pushed job");
    pusher.join().expect("pusher");
    assert_eq!(raw, pushed);
    let busy = server.busy_count();
    assert_eq!(busy, 2, "one job running in each capsule");

    // Stop with both still held: each goes back to its own queue.
    assert_eq!(server.stop().expect("stop"), 2);
    assert_eq!(llen(&mut c, "queue:single"), 1);
    assert_eq!(llen(&mut c, "queue:default"), 1);
    assert!(smembers(&mut c, "processes").is_empty());
}

#[test]
fn a_capsule_without_threads_or_named_twice_is_refused() {
    let t = TestRedis::start();
    let mut bad = config();
    bad.capsules[0].concurrency = 0;
    let err = Server::start(t.redis(), bad).err().expect("refused");
    assert!(
        err.to_string().contains("capsule \"single\": concurrency"),
        "{err}"
    );
    let mut twice = config();
    twice.capsules.push(twice.capsules[0].clone());
    let err = Server::start(t.redis(), twice).err().expect("refused");
    assert!(err.to_string().contains("defined twice"), "{err}");
}
