//! The scheduler against a real Redis: due jobs move from `schedule`/`retry` to their queues with
//! nothing changed but `enqueued_at`; members that are not runnable jobs go to `dead`; the leader
//! wakes when the next job is due and otherwise polls every `POLL`.

mod support;

use std::time::Duration;

use queue_core::client;
use queue_core::clock::now_f64;
use queue_core::link::blocking::BlockingConn;
use queue_core::scheduler::{self, Due};
use queue_core::server::{Server, ServerConfig};

use support::*;

/// A job as another Sidekiq peer (Ruby's JSON generator) might have written it: fields we do not know,
/// integers no double can hold, floats whose digits matter, non-ASCII text and escapes.
const ODD_JOB: &str = concat!(
    r#"{"class":"Billing::InvoiceWorker","#,
    r#""args":[123456789012345678901234567890,-0.0,0.1,1.0e-07,6.02214076e+23,0.30000000000000004,"ünïcödé 日本語 🎉","tab\tquote\"back\\slash\u001f"],"#,
    r#""queue":"mail","jid":"0123456789abcdef01234567","retry":3,"#,
    r#""created_at":1700000000.123456,"#,
    r#""custom_meta":{"z":[null,true,false],"a":{"big":18446744073709551616,"neg":-98765432109876543210}},"#,
    r#""tags":[],"bid":null}"#
);

fn schedule(t: &TestRedis, jobs: &[(f64, Vec<u8>)]) {
    let mut bc = BlockingConn::new(&t.redis()).expect("blocking connection");
    bc.run(async |c| client::schedule(c, jobs).await)
        .expect("schedule");
}

fn enqueue_due(t: &TestRedis) -> usize {
    let mut bc = BlockingConn::new(&t.redis()).expect("blocking connection");
    bc.run(async |c| scheduler::enqueue_due(c).await)
        .expect("enqueue_due")
}

/// Splits `pushed` into the original job and the value of the `enqueued_at` the scheduler appended.
fn strip_enqueued_at<'a>(pushed: &'a str, original: &str) -> &'a str {
    let body = original.strip_suffix('}').expect("a job is a JSON object");
    let rest = pushed
        .strip_prefix(body)
        .unwrap_or_else(|| panic!("job changed on the way:\n  was {original}\n  now {pushed}"));
    rest.strip_prefix(r#","enqueued_at":"#)
        .and_then(|r| r.strip_suffix('}'))
        .unwrap_or_else(|| panic!("expected only an appended enqueued_at, got tail {rest:?}"))
}

#[test]
fn a_due_job_reaches_its_queue_unchanged_except_for_enqueued_at() {
    let t = TestRedis::start();
    let mut c = t.conn();
    let now = now_f64();
    let future = job("mail", 99);
    schedule(
        &t,
        &[
            (now - 60.0, ODD_JOB.as_bytes().to_vec()),
            (now + 3600.0, future.clone()),
        ],
    );
    assert_eq!(zmembers(&mut c, "schedule").len(), 2);

    assert_eq!(enqueue_due(&t), 1, "only the due job moves");

    let queued = lrange(&mut c, "queue:mail");
    assert_eq!(queued.len(), 1);
    let pushed = std::str::from_utf8(&queued[0]).expect("job is UTF-8");
    let enqueued_at = strip_enqueued_at(pushed, ODD_JOB);
    let value: f64 = enqueued_at
        .parse()
        .unwrap_or_else(|_| panic!("enqueued_at {enqueued_at:?} is not a number"));
    assert!(
        enqueued_at.contains('.') && value > 1.7e9,
        "enqueued_at {enqueued_at:?} is not epoch seconds as a float"
    );

    assert_eq!(
        zmembers(&mut c, "schedule"),
        vec![future],
        "the due job left the schedule, the future one stayed"
    );
    assert_eq!(smembers(&mut c, "queues"), vec!["mail"]);
    assert!(zmembers(&mut c, "dead").is_empty());

    assert_eq!(enqueue_due(&t), 0, "a second pass finds nothing due");
    assert_eq!(llen(&mut c, "queue:mail"), 1, "the job was pushed once");
}

#[test]
fn a_due_retry_goes_back_to_its_queue() {
    let t = TestRedis::start();
    let mut c = t.conn();
    let failed = r#"{"class":"W","args":[],"queue":"low","jid":"r1","retry":true,"retry_count":0,"error_class":"RuntimeError","error_message":"boom","failed_at":1700000000.5}"#;
    redis::cmd("ZADD")
        .arg("retry")
        .arg(1.0)
        .arg(failed)
        .exec(&mut c)
        .expect("ZADD");

    assert_eq!(enqueue_due(&t), 1);
    let queued = lrange(&mut c, "queue:low");
    assert_eq!(queued.len(), 1);
    strip_enqueued_at(&text(&queued[0]), failed);
    assert!(zmembers(&mut c, "retry").is_empty());
    assert_eq!(smembers(&mut c, "queues"), vec!["low"]);
}

#[test]
fn unrunnable_schedule_members_go_to_dead() {
    let t = TestRedis::start();
    let mut c = t.conn();
    let now = now_f64();
    let broken = br#"{"class":"Broken","args":[1,"#.to_vec();
    let queueless = br#"{"class":"NoQueue","args":[],"jid":"nq"}"#.to_vec();
    schedule(&t, &[(now - 5.0, broken.clone()), (now - 5.0, queueless)]);

    assert_eq!(enqueue_due(&t), 2);

    assert!(zmembers(&mut c, "schedule").is_empty());
    let dead = zmembers(&mut c, "dead");
    assert_eq!(dead.len(), 2);
    assert!(
        dead.contains(&broken),
        "invalid JSON is kept in dead byte for byte: {:?}",
        dead.iter().map(|d| text(d)).collect::<Vec<_>>()
    );
    let filed: serde_json::Value = dead
        .iter()
        .find(|d| **d != broken)
        .map(|d| serde_json::from_slice(d).expect("filed job is JSON"))
        .expect("the queueless job is in dead");
    assert_eq!(filed["class"], "NoQueue");
    assert_eq!(filed["jid"], "nq");
    assert_eq!(filed["error_class"], "JobQueue::InvalidJob");
    assert!(filed["error_message"].is_string());
    assert!(filed["failed_at"].is_number());
    assert!(
        smembers(&mut c, "queues").is_empty(),
        "no queue was created"
    );
}

#[test]
fn many_due_jobs_move_in_one_call_earliest_first() {
    const N: usize = 250;
    let t = TestRedis::start();
    let mut c = t.conn();
    let base = now_f64() - 1000.0;
    let jobs: Vec<Vec<u8>> = (0..N)
        .map(|n| {
            format!(r#"{{"class":"W","args":[{n}],"queue":"bulk","jid":"j{n}"}}"#).into_bytes()
        })
        .collect();
    // Scheduled in reverse so the set's order, not the insertion order, decides.
    let scheduled: Vec<(f64, Vec<u8>)> = jobs
        .iter()
        .enumerate()
        .rev()
        .map(|(n, j)| (base + n as f64, j.clone()))
        .collect();
    schedule(&t, &scheduled);

    assert_eq!(enqueue_due(&t), N);
    assert!(zmembers(&mut c, "schedule").is_empty());
    let queued = queue_in_run_order(&mut c, "queue:bulk");
    assert_eq!(queued.len(), N);
    for (n, (got, original)) in queued.iter().zip(&jobs).enumerate() {
        strip_enqueued_at(&text(got), &text(original));
        assert!(
            text(got).contains(&format!(r#""args":[{n}]"#)),
            "position {n} holds {}",
            text(got)
        );
    }
}

#[test]
fn one_process_at_a_time_holds_the_scheduler_lease() {
    let t = TestRedis::start();
    let mut bc = BlockingConn::new(&t.redis()).expect("blocking connection");
    let mut lead = |who: &'static str| {
        bc.run(async |c| scheduler::lead(c, who).await)
            .expect("lead")
    };
    assert!(lead("a"));
    assert!(!lead("b"), "the lease is taken");
    assert!(lead("a"), "the holder renews it");
    let mut bc = BlockingConn::new(&t.redis()).expect("blocking connection");
    bc.run(async |c| scheduler::resign(c, "b").await)
        .expect("resign");
    let mut c = t.conn();
    let holder: Option<String> = redis::cmd("GET")
        .arg("jq:scheduler:leader")
        .query(&mut c)
        .expect("GET");
    assert_eq!(
        holder.as_deref(),
        Some("a"),
        "only the holder can give it up"
    );
    bc.run(async |c| scheduler::resign(c, "a").await)
        .expect("resign");
    assert!(bc
        .run(async |c| scheduler::lead(c, "b").await)
        .expect("lead"));
}

fn poll(t: &TestRedis, who: &str) -> Option<Due> {
    let mut bc = BlockingConn::new(&t.redis()).expect("blocking connection");
    bc.run(async |c| scheduler::poll(c, who).await)
        .expect("poll")
}

fn zadd(c: &mut redis::Connection, set: &str, score: f64, member: &[u8]) {
    redis::cmd("ZADD")
        .arg(set)
        .arg(score)
        .arg(member)
        .exec(c)
        .expect("ZADD");
}

#[test]
fn a_poll_counts_the_due_jobs_and_finds_the_next_one_of_either_set() {
    let t = TestRedis::start();
    let mut c = t.conn();
    assert_eq!(
        poll(&t, "a"),
        Some(Due {
            count: 0,
            next_at: None
        }),
        "nothing scheduled"
    );

    let now = now_f64();
    let (soon, later) = (now + 50.123_456_7, now + 3600.0);
    zadd(&mut c, "schedule", now - 1.0, &job("q", 1));
    zadd(&mut c, "schedule", later, &job("q", 2));
    zadd(&mut c, "retry", now - 2.0, &job("q", 3));
    zadd(&mut c, "retry", soon, &job("q", 4));
    assert_eq!(
        poll(&t, "a"),
        Some(Due {
            count: 2,
            next_at: Some(soon)
        }),
        "the due job of each set, and the earliest later score, exact to the bit"
    );

    redis::cmd("ZREM")
        .arg("retry")
        .arg(job("q", 4))
        .exec(&mut c)
        .expect("ZREM");
    assert_eq!(poll(&t, "a").and_then(|d| d.next_at), Some(later));

    redis::cmd("DEL").arg("schedule").exec(&mut c).expect("DEL");
    zadd(&mut c, "schedule", f64::INFINITY, &job("q", 5));
    assert_eq!(
        poll(&t, "a"),
        Some(Due {
            count: 1,
            next_at: Some(f64::INFINITY)
        }),
        "a job at +inf is never due"
    );

    assert_eq!(poll(&t, "b"), None, "another process leads: nothing read");
}

#[test]
fn each_turn_says_how_long_to_wait() {
    let t = TestRedis::start();
    let mut c = t.conn();
    let mut bc = BlockingConn::new(&t.redis()).expect("blocking connection");
    let mut turn = |who: &'static str| {
        bc.run(async |c| Ok(scheduler::turn(c, who).await))
            .expect("turn")
    };

    assert_eq!(
        turn("a"),
        scheduler::POLL,
        "an idle leader polls every POLL"
    );
    assert_eq!(
        turn("b"),
        scheduler::STANDBY,
        "a standby only tries for the lease"
    );

    zadd(&mut c, "schedule", now_f64() + 3600.0, &job("q", 1));
    assert_eq!(turn("a"), scheduler::POLL, "a job due later than POLL");

    let at = now_f64() + 0.020;
    zadd(&mut c, "retry", at, &job("q", 2));
    let pause = turn("a");
    assert!(
        pause <= Duration::from_millis(20),
        "the leader sleeps until the retry is due, not a full POLL; got {pause:?}"
    );

    // What the loop does: sleep as told, turn again, until the job has moved.
    let mut pause = pause;
    let mut turns = 0;
    while llen(&mut c, "queue:q") == 0 {
        assert!(turns < 20, "the due retry was never moved");
        std::thread::sleep(pause);
        pause = turn("a");
        turns += 1;
    }
    let moved_at = now_f64();
    assert!(
        moved_at >= at,
        "moved {:.1} ms early",
        (at - moved_at) * 1e3
    );
    assert!(turns <= 3, "{turns} turns to move one job");
    assert_eq!(pause, scheduler::POLL, "next is the job an hour away");
    assert!(zmembers(&mut c, "retry").is_empty());
}

/// A running server that leads the scheduler (no other process is there to take the lease).
fn start_leader(t: &TestRedis, identity: &str) -> Server {
    let config = ServerConfig {
        scheduler: true,
        ..server_config(identity, &[("default", 1)])
    };
    let server = Server::start(t.redis(), config).expect("server starts");
    let mut c = t.conn();
    wait_for("the server to take the scheduler lease", || {
        redis::cmd("GET")
            .arg("jq:scheduler:leader")
            .query::<Option<String>>(&mut c)
            .expect("GET")
            .as_deref()
            == Some(identity)
    });
    server
}

/// Waits for the next job on `queue:<queue>` (BRPOP) and returns it with the time it arrived.
fn next_arrival(c: &mut redis::Connection, queue: &str) -> (Vec<u8>, f64) {
    let (_, raw): (String, Vec<u8>) = redis::cmd("BRPOP")
        .arg(format!("queue:{queue}"))
        .arg(EVENT_TIMEOUT.as_secs_f64())
        .query::<Option<(String, Vec<u8>)>>(c)
        .expect("BRPOP")
        .unwrap_or_else(|| panic!("no job reached queue:{queue} within {EVENT_TIMEOUT:?}"));
    (raw, now_f64())
}

fn millis(seconds: &[f64]) -> Vec<String> {
    seconds.iter().map(|s| format!("{:.1}", s * 1e3)).collect()
}

#[test]
fn a_leader_moves_jobs_scheduled_ahead_within_milliseconds_of_their_time() {
    const N: usize = 20;
    let t = TestRedis::start();
    let server = start_leader(&t, "host:1:leader");
    let mut c = t.conn();

    // Spread over 0.3-1.25 s ahead, pushed in reverse so the set's order is what counts.
    let base = now_f64() + 0.3;
    let scheduled: Vec<(f64, Vec<u8>)> = (0..N)
        .rev()
        .map(|n| (base + n as f64 * 0.05, job("timed", n)))
        .collect();
    schedule(&t, &scheduled);

    let mut late = Vec::new();
    for n in 0..N {
        let (raw, arrived) = next_arrival(&mut c, "timed");
        assert!(
            text(&raw).contains(&format!(r#""args":[{n}]"#)),
            "job {n} expected, got {}",
            text(&raw)
        );
        late.push(arrived - (base + n as f64 * 0.05));
    }
    server.stop().expect("stop");

    eprintln!("lateness of jobs scheduled ahead, ms: {:?}", millis(&late));
    assert!(
        late.iter().all(|&l| l >= 0.0),
        "a job moved before its time: {:?}",
        millis(&late)
    );
    // Polling every 0.5 s, as the scheduler used to, makes them 0-500 ms late.
    let worst = late.iter().copied().fold(0.0, f64::max);
    assert!(
        worst < 0.1,
        "a job reached its queue {:.1} ms late: {:?}",
        worst * 1e3,
        millis(&late)
    );
}

#[test]
fn a_leader_finds_a_job_due_at_once_within_poll() {
    const N: usize = 10;
    let t = TestRedis::start();
    let server = start_leader(&t, "host:1:leader");
    let mut c = t.conn();

    // A retry with no delay: due the moment it is written, so only the leader's polling finds it.
    let mut waits = Vec::new();
    for n in 0..N {
        let at = now_f64();
        zadd(&mut c, "retry", at, &job("now", n));
        let (_, arrived) = next_arrival(&mut c, "now");
        waits.push(arrived - at);
    }
    server.stop().expect("stop");

    eprintln!("wait for jobs due at once, ms: {:?}", millis(&waits));
    // At most POLL (25 ms) and a move; polling every 0.5 s, as the scheduler used to, makes it 0.5 s.
    let worst = waits.iter().copied().fold(0.0, f64::max);
    assert!(
        worst < 0.1,
        "a due retry waited {:.1} ms for the scheduler: {:?}",
        worst * 1e3,
        millis(&waits)
    );
}

#[test]
fn an_idle_leader_polls_at_most_fifty_times_a_second() {
    const WINDOW: Duration = Duration::from_secs(2);
    let t = TestRedis::start();
    let server = start_leader(&t, "host:1:leader");
    let mut c = t.conn();

    // With nothing due, due.lua reads the head of each set with one ZRANGE per leading poll; nothing
    // else calls ZRANGE.
    let before = command_calls(&mut c, "zrange");
    let from = std::time::Instant::now();
    std::thread::sleep(WINDOW); // a rate over time: there is no event to wait for
    let polls = (command_calls(&mut c, "zrange") - before) as f64 / 2.0;
    let rate = polls / from.elapsed().as_secs_f64();
    server.stop().expect("stop");

    eprintln!("idle leader: {rate:.1} polls/s");
    assert!(
        rate <= 50.0,
        "an idle leader polled {rate:.1} times a second"
    );
    assert!(
        rate >= 10.0,
        "an idle leader polled only {rate:.1} times a second"
    );
}
