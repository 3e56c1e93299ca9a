//! The scheduler against a real Redis: due jobs move from `schedule`/`retry` to their queues with
//! nothing changed but `enqueued_at`; members that are not runnable jobs go to `dead`.

mod support;

use queue_core::blocking::BlockingConn;
use queue_core::clock::now_f64;
use queue_core::{client, scheduler};

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
