//! GitLab-style deduplication against a real Redis: the push takes the idempotency key atomically,
//! duplicates are dropped or marked, and a fetcher releases the key at start or with the ack/failure
//! (rescheduling once when a duplicate was dropped meanwhile), handing over the newest positions.

mod support;

use std::time::{Duration, Instant};

use queue_core::dedup::{self, DedupJob, FlagCheck, Outcome, PushOptions, Release};
use queue_core::fetch::Fetcher;
use queue_core::link::blocking::SyncConn;
use queue_core::retry::{Failure, RetryIn};
use queue_core::server::Server;
use serde_json::Value;

use support::*;

const IDENTITY: &str = "host:123:abcdefabcdef";

fn opts(idempotent: bool, reschedule: bool) -> PushOptions {
    PushOptions {
        class: "W".to_owned(),
        ttl: 600,
        idempotent,
        reschedule,
        flag: FlagCheck::Redis,
    }
}

fn job(jid: &str, extra: &str) -> DedupJob {
    DedupJob {
        jid: jid.to_owned(),
        json: format!(r#"{{"class":"W","args":[1,12345678901234567890.50],"queue":"default","jid":"{jid}"{extra}}}"#)
            .into_bytes(),
        args: b"[1,12345678901234567890.50]".to_vec(),
        at: None,
    }
}

fn push(conn: &mut SyncConn, opts: &PushOptions, jobs: &[DedupJob]) -> Vec<Outcome> {
    dedup::push_sync(conn, "default", opts, jobs).expect("push")
}

fn key(t: &TestRedis) -> String {
    t.redis().keys().duplicate(
        "default",
        &dedup::digest("W", b"[1,12345678901234567890.50]"),
    )
}

fn parse(raw: &[u8]) -> Value {
    serde_json::from_slice(raw).expect("job JSON")
}

fn server(t: &TestRedis) -> Server {
    let mut config = server_config(IDENTITY, &[("default", 1)]);
    config.concurrency = 1;
    config.max_batch = 1;
    Server::start(t.redis(), config).expect("server starts")
}

fn take(fetcher: &mut Fetcher) -> Vec<u8> {
    fetcher
        .next(Duration::from_secs(5))
        .expect("fetch")
        .expect("a job")
        .1
}

/// Job "a" pushed with deduplication (`reschedule_once` as asked), taken by a one-thread server's
/// fetcher: the pushing connection, a connection to inspect with, the server and the fetcher.
fn running_a(t: &TestRedis, reschedule: bool) -> (SyncConn, redis::Connection, Server, Fetcher) {
    let mut conn = SyncConn::new(&t.redis());
    let c = t.conn();
    push(&mut conn, &opts(true, reschedule), &[job("a", "")]);
    let server = server(t);
    let mut fetcher = server.fetcher("t1").expect("fetcher");
    take(&mut fetcher);
    (conn, c, server, fetcher)
}

fn release(t: &TestRedis, jid: &str, reschedule: bool) -> Release {
    Release {
        key: key(t),
        jid: jid.to_owned(),
        ttl: 600,
        reschedule,
    }
}

#[test]
fn idempotent_duplicates_are_dropped_in_one_atomic_push() {
    let t = TestRedis::with_namespace("resque:gitlab:");
    let mut conn = SyncConn::new(&t.redis());
    let mut c = t.conn();
    let outcomes = push(&mut conn, &opts(true, false), &[job("a", ""), job("b", "")]);
    assert_eq!(
        outcomes,
        vec![Outcome::Pushed, Outcome::Dropped("a".into())]
    );
    let k = key(&t);
    assert!(k.starts_with("resque:gitlab:duplicate:default:"), "{k}");
    let stored = lrange(&mut c, &t.key("queue:default"));
    assert_eq!(stored.len(), 1);
    let expected = format!(
        r#"{{"class":"W","args":[1,12345678901234567890.50],"queue":"default","jid":"a","idempotency_key":"{k}"}}"#
    );
    assert_eq!(
        text(&stored[0]),
        expected,
        "numbers byte for byte, key added"
    );
    let holder: String = redis::cmd("GET").arg(&k).query(&mut c).expect("GET");
    assert_eq!(holder, "a");
    let left = ttl(&mut c, &k);
    assert!((595..=600).contains(&left), "ttl {left}");
    assert_eq!(
        smembers(&mut c, &t.key("queues")),
        vec!["default".to_owned()]
    );
}

/// `perform_async`'s push (one immediate job) takes its key, or is dropped, through the short
/// `dedup_push_one.lua`, in one round trip; only a duplicate to mark needs the general script, in a
/// second. The job and key it writes are the general script's, byte for byte.
/// The short script's `EVALSHA` is built by hand: after `SCRIPT FLUSH` (a restarted Redis) it loads
/// the script and pushes all the same.
#[test]
fn the_short_script_is_loaded_again_after_a_flush() {
    let t = TestRedis::start();
    let mut conn = SyncConn::new(&t.redis());
    let mut c = t.conn();
    assert_eq!(
        push(&mut conn, &opts(true, false), &[job("a", "")]),
        vec![Outcome::Pushed]
    );
    redis::cmd("SCRIPT")
        .arg("FLUSH")
        .exec(&mut c)
        .expect("SCRIPT FLUSH");
    assert_eq!(
        push(&mut conn, &opts(true, false), &[job("b", "")]),
        vec![Outcome::Dropped("a".into())]
    );
    assert_eq!(lrange(&mut c, &t.key("queue:default")).len(), 1);
}

#[test]
fn one_job_is_pushed_or_dropped_by_the_short_script() {
    let t = TestRedis::with_namespace("resque:gitlab:");
    let mut conn = SyncConn::new(&t.redis());
    let mut c = t.conn();
    let general = queue_core::scripts::DEDUP_PUSH.get_hash().to_owned();
    let loaded = |c: &mut redis::Connection| -> bool {
        let found: Vec<bool> = redis::cmd("SCRIPT")
            .arg("EXISTS")
            .arg(&general)
            .query(c)
            .expect("SCRIPT EXISTS");
        found == [true]
    };
    // Loaded first, so that no NOSCRIPT retry adds to the calls counted.
    queue_core::scripts::DEDUP_PUSH_ONE
        .load(&mut c)
        .expect("SCRIPT LOAD");
    assert_eq!(
        push(&mut conn, &opts(true, false), &[job("a", "")]),
        vec![Outcome::Pushed]
    );
    assert_eq!(
        push(&mut conn, &opts(true, false), &[job("b", "")]),
        vec![Outcome::Dropped("a".into())]
    );
    assert_eq!(command_calls(&mut c, "evalsha"), 2, "one call a push");
    assert!(!loaded(&mut c), "the general script was not needed");
    let k = key(&t);
    let stored = lrange(&mut c, &t.key("queue:default"));
    let expected = format!(
        r#"{{"class":"W","args":[1,12345678901234567890.50],"queue":"default","jid":"a","idempotency_key":"{k}"}}"#
    );
    assert_eq!(
        stored.iter().map(|j| text(j)).collect::<Vec<_>>(),
        vec![expected]
    );
    assert_eq!(
        redis::cmd("GET")
            .arg(&k)
            .query::<String>(&mut c)
            .expect("GET"),
        "a"
    );
    assert!((595..=600).contains(&ttl(&mut c, &k)));
    assert_eq!(
        smembers(&mut c, &t.key("queues")),
        vec!["default".to_owned()]
    );
    let drops =
        queue_core::metrics::field::name(queue_core::metrics::field::Kind::Dropped, "default", "W");
    assert_eq!(
        hget(&mut c, &t.key("jq:metrics"), &drops).as_deref(),
        Some("1"),
        "the drop is counted"
    );
    // A duplicate of a worker that is not idempotent is marked: the general script's work.
    assert_eq!(
        push(&mut conn, &opts(false, false), &[job("c", "")]),
        vec![Outcome::Marked("a".into())]
    );
    assert!(loaded(&mut c));
    assert_eq!(llen(&mut c, &t.key("queue:default")), 2);
}

#[test]
fn other_duplicates_are_marked_and_pushed() {
    let t = TestRedis::start();
    let mut conn = SyncConn::new(&t.redis());
    let mut c = t.conn();
    let outcomes = push(
        &mut conn,
        &opts(false, false),
        &[job("a", ""), job("b", "")],
    );
    assert_eq!(outcomes, vec![Outcome::Pushed, Outcome::Marked("a".into())]);
    let run_order = queue_in_run_order(&mut c, "queue:default");
    assert_eq!(parse(&run_order[1])["duplicate-of"], "a");
    assert!(parse(&run_order[0]).get("duplicate-of").is_none());
}

#[test]
fn the_queue_flag_turns_dropping_off_from_redis_or_the_caller() {
    let t = TestRedis::start();
    let redis = t.redis();
    let mut conn = SyncConn::new(&redis);
    let flag = dedup::flag_name("default");
    assert_eq!(flag, "disable_default_deduplication");
    conn.cmd::<i64>(&dedup::set_flag_cmd(redis.keys(), &flag, true))
        .expect("set flag");
    let outcomes = push(&mut conn, &opts(true, false), &[job("a", ""), job("b", "")]);
    assert_eq!(outcomes, vec![Outcome::Pushed, Outcome::Marked("a".into())]);
    conn.cmd::<i64>(&dedup::set_flag_cmd(redis.keys(), &flag, false))
        .expect("clear flag");
    assert_eq!(
        push(&mut conn, &opts(true, false), &[job("c", "")]),
        vec![Outcome::Dropped("a".into())]
    );
    let mut given = opts(true, false);
    given.flag = FlagCheck::Given(true);
    assert_eq!(
        push(&mut conn, &given, &[job("d", "")]),
        vec![Outcome::Marked("a".into())]
    );
}

#[test]
fn scheduled_jobs_live_for_their_delay_plus_the_ttl() {
    let t = TestRedis::start();
    let mut conn = SyncConn::new(&t.redis());
    let mut c = t.conn();
    let mut scheduled = job("a", "");
    scheduled.at = Some(queue_core::clock::now_f64() + 100.0);
    let outcomes = push(
        &mut conn,
        &opts(true, false),
        &[scheduled.clone(), job("b", "")],
    );
    assert_eq!(
        outcomes,
        vec![Outcome::Pushed, Outcome::Dropped("a".into())]
    );
    assert_eq!(zmembers(&mut c, "schedule").len(), 1);
    assert_eq!(llen(&mut c, "queue:default"), 0);
    let left = ttl(&mut c, &key(&t));
    assert!((695..=701).contains(&left), "ttl {left}");
}

#[test]
fn until_executing_releases_before_the_job_starts_and_only_its_own_key() {
    let t = TestRedis::start();
    let (mut conn, mut c, server, mut fetcher) = running_a(&t, false);
    // Someone else's jid does not release the key (read: the release runs in this round trip).
    fetcher
        .dedup(release(&t, "zzz", false), false, true)
        .expect("dedup");
    assert!(exists(&mut c, &key(&t)), "a newer holder's key survives");
    fetcher.done();
    // The job that holds it does, before it starts: a duplicate is queued again.
    push(&mut conn, &opts(true, false), &[job("c", "")]);
    assert_eq!(
        llen(&mut c, "queue:default"),
        0,
        "c dropped while a is queued"
    );
    redis::cmd("DEL").arg(key(&t)).exec(&mut c).expect("DEL");
    push(&mut conn, &opts(true, false), &[job("c", "")]);
    let raw = take(&mut fetcher);
    assert_eq!(parse(&raw)["jid"], "c");
    fetcher
        .dedup(release(&t, "c", false), false, false)
        .expect("dedup");
    wait_for("the key is released", || !exists(&mut c, &key(&t)));
    assert_eq!(
        push(&mut conn, &opts(true, false), &[job("d", "")]),
        vec![Outcome::Pushed]
    );
    fetcher.done();
    drop(fetcher);
    server.stop().expect("stop");
}

#[test]
fn until_executed_releases_with_the_ack_and_reschedules_once() {
    let t = TestRedis::start();
    let (mut conn, mut c, server, mut fetcher) = running_a(&t, true);
    fetcher
        .dedup(release(&t, "a", true), true, false)
        .expect("dedup");
    // Dropped while a runs: recorded for the reschedule.
    assert_eq!(
        push(&mut conn, &opts(true, true), &[job("b", "")]),
        vec![Outcome::Dropped("a".into())]
    );
    assert_eq!(llen(&mut c, "queue:default"), 0);
    fetcher.done();
    wait_for("a rescheduled", || llen(&mut c, "queue:default") == 1);
    let again = lrange(&mut c, "queue:default").remove(0);
    let again_job = parse(&again);
    assert_eq!(again_job["rescheduled_once"], Value::Bool(true));
    let new_jid = again_job["jid"].as_str().expect("jid").to_owned();
    assert_ne!(new_jid, "a");
    let holder: String = redis::cmd("GET").arg(key(&t)).query(&mut c).expect("GET");
    assert_eq!(holder, new_jid, "the rescheduled job holds the key");
    assert!(text(&again).contains("[1,12345678901234567890.50]"));
    // The rescheduled run, with no duplicate meanwhile, releases without another reschedule.
    take(&mut fetcher);
    fetcher
        .dedup(release(&t, &new_jid, true), true, false)
        .expect("dedup");
    fetcher.done();
    wait_for("released", || !exists(&mut c, &key(&t)));
    assert_eq!(llen(&mut c, "queue:default"), 0);
    drop(fetcher);
    server.stop().expect("stop");
}

#[test]
fn over_tcp_a_release_with_the_ack_goes_out_at_once() {
    // Over TCP a bare ack waits in the kernel for the thread's next call (~200 ms at most); a
    // release must not: the next push of the job is accepted as soon as it has run.
    let t = TestRedis::start_tcp();
    let (mut conn, mut c, server, mut fetcher) = running_a(&t, false);
    fetcher
        .dedup(release(&t, "a", false), true, false)
        .expect("dedup");
    let done = Instant::now();
    fetcher.done();
    wait_for("released", || !exists(&mut c, &key(&t)));
    let took = done.elapsed();
    assert!(took < Duration::from_millis(100), "released after {took:?}");
    assert_eq!(
        push(&mut conn, &opts(true, false), &[job("b", "")]),
        vec![Outcome::Pushed]
    );
    drop(fetcher);
    server.stop().expect("stop");
}

#[test]
fn until_executed_releases_when_the_job_fails() {
    let t = TestRedis::start();
    let (_conn, mut c, server, mut fetcher) = running_a(&t, false);
    fetcher
        .dedup(release(&t, "a", false), true, false)
        .expect("dedup");
    assert!(exists(&mut c, &key(&t)));
    let failure = Failure {
        error_class: "RuntimeError".to_owned(),
        error_message: "boom".to_owned(),
        backtrace: vec![],
        retry_in: RetryIn::Default,
        worker_retry: None,
    };
    fetcher.fail(&failure).expect("filed");
    assert!(!exists(&mut c, &key(&t)), "released in the same step");
    assert_eq!(zmembers(&mut c, "retry").len(), 1);
    drop(fetcher);
    server.stop().expect("stop");
}

#[test]
fn dropped_duplicates_hand_their_newest_positions_to_the_job_that_runs() {
    let t = TestRedis::start();
    let mut conn = SyncConn::new(&t.redis());
    let wal = |main: &str, ci: &str| format!(r#","wal_locations":{{"main":"{main}","ci":"{ci}"}}"#);
    push(
        &mut conn,
        &opts(true, false),
        &[job("a", &wal("0/A0", "0/5"))],
    );
    push(
        &mut conn,
        &opts(true, false),
        &[job("b", &wal("0/B0", "0/4"))],
    );
    push(
        &mut conn,
        &opts(true, false),
        &[job("c", &wal("0/9F", "0/3"))],
    );
    let server = server(&t);
    let mut fetcher = server.fetcher("t1").expect("fetcher");
    take(&mut fetcher);
    let merged = fetcher
        .dedup(release(&t, "a", false), false, true)
        .expect("dedup")
        .expect("positions");
    assert_eq!(
        merged,
        vec![
            ("main".to_owned(), "0/B0".to_owned()),
            ("ci".to_owned(), "0/5".to_owned())
        ]
    );
    let mut c = t.conn();
    assert!(!exists(&mut c, &key(&t)));
    assert!(!exists(&mut c, &format!("{}:meta", key(&t))));
    fetcher.done();
    drop(fetcher);
    server.stop().expect("stop");
}

/// Jobs 1..=4 (class `classes[n - 1]`, args `[n]`) pushed with deduplication, a server taking up to
/// five at a time on one thread, and its fetcher. Redis's command stats are reset.
fn four_deduplicated(
    t: &TestRedis,
    classes: [&str; 4],
) -> (Server, Fetcher, impl Fn(usize) -> Release + use<>) {
    let redis = t.redis();
    let mut conn = SyncConn::new(&redis);
    let jobs: Vec<DedupJob> = (1..=4)
        .map(|n| DedupJob {
            jid: format!("j{n}"),
            json: format!(
                r#"{{"class":"{}","args":[{n}],"queue":"default","jid":"j{n}"}}"#,
                classes[n - 1]
            )
            .into_bytes(),
            args: format!("[{n}]").into_bytes(),
            at: None,
        })
        .collect();
    for job in &jobs {
        let mut o = opts(true, false);
        o.class = classes[job.jid[1..].parse::<usize>().expect("n") - 1].to_owned();
        push(&mut conn, &o, std::slice::from_ref(job));
    }
    redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .query::<()>(&mut t.conn())
        .expect("reset");
    let keys = redis.keys().clone();
    let classes = classes.map(str::to_owned);
    let release_of = move |n: usize| Release {
        key: keys.duplicate(
            "default",
            &dedup::digest(&classes[n - 1], format!("[{n}]").as_bytes()),
        ),
        jid: format!("j{n}"),
        ttl: 600,
        reschedule: false,
    };
    let mut config = server_config(IDENTITY, &[("default", 1)]);
    config.concurrency = 1;
    config.max_batch = 5;
    let server = Server::start(t.redis(), config).expect("server starts");
    let fetcher = server.fetcher("t1").expect("fetcher");
    (server, fetcher, release_of)
}

/// The running job's start and end, as the processor makes them for an `until_executing` job.
fn run_until_executing(fetcher: &mut Fetcher, release: Release) {
    fetcher.dedup(release, false, false).expect("dedup");
    fetcher.done();
}

/// Job `n` comes next with its key already released with its batch; it runs.
fn run_released(fetcher: &mut Fetcher, n: usize, release: Release) {
    assert_eq!(parse(&take(fetcher))["jid"], format!("j{n}"));
    // The caller may skip the dedup call: there is nothing left to release.
    assert!(fetcher.running_key_released(), "job {n}");
    run_until_executing(fetcher, release);
}

/// After a round trip (an empty fetch) Redis has run everything the fetcher wrote before it: it
/// made `evals` script calls in all. Then the server stops.
fn assert_evals_then_stop(
    c: &mut redis::Connection,
    mut fetcher: Fetcher,
    server: Server,
    evals: u64,
) {
    assert!(fetcher.next(Duration::ZERO).expect("fetch").is_none());
    assert_eq!(command_calls(c, "eval"), evals);
    drop(fetcher);
    server.stop().expect("stop");
}

#[test]
fn a_batchs_keys_go_out_together_when_it_arrives() {
    let t = TestRedis::start();
    let mut c = t.conn();
    let (server, mut fetcher, release_of) = four_deduplicated(&t, ["W"; 4]);
    // Job 1 comes alone (the queue is untimed); its dedup call teaches the fetcher the class.
    assert_eq!(parse(&take(&mut fetcher))["jid"], "j1");
    assert!(!fetcher.running_key_released());
    run_until_executing(&mut fetcher, release_of(1));
    assert!(exists(&mut c, &release_of(2).key));
    // Jobs 2-4 come as one batch, and its three releases go out as it arrives, in one call.
    assert_eq!(parse(&take(&mut fetcher))["jid"], "j2");
    wait_for("the batch's keys released", || {
        (2..=4).all(|n| !exists(&mut c, &release_of(n).key))
    });
    assert!(fetcher.running_key_released(), "job 2");
    run_until_executing(&mut fetcher, release_of(2));
    for n in 3..=4 {
        run_released(&mut fetcher, n, release_of(n));
    }
    // Their own dedup calls wrote nothing: one script call for job 1, one for the batch.
    assert_evals_then_stop(&mut c, fetcher, server, 2);
}

#[test]
fn a_class_learnt_mid_batch_releases_the_rest_of_its_jobs_at_once() {
    let t = TestRedis::start();
    let mut c = t.conn();
    let (server, mut fetcher, release_of) = four_deduplicated(&t, ["W", "V", "V", "V"]);
    assert_eq!(parse(&take(&mut fetcher))["jid"], "j1");
    run_until_executing(&mut fetcher, release_of(1));
    // V is not known yet: the batch arrives and nothing goes out for it.
    assert_eq!(parse(&take(&mut fetcher))["jid"], "j2");
    assert!((2..=4).all(|n| exists(&mut c, &release_of(n).key)));
    assert!(!fetcher.running_key_released());
    // V2's dedup call teaches the class: V3's and V4's releases go in the same call as its own.
    fetcher.dedup(release_of(2), false, false).expect("dedup");
    wait_for("V's keys released", || {
        (2..=4).all(|n| !exists(&mut c, &release_of(n).key))
    });
    fetcher.done();
    for n in 3..=4 {
        run_released(&mut fetcher, n, release_of(n));
    }
    assert_evals_then_stop(&mut c, fetcher, server, 2);
}
