//! The push path exactly as the Ruby client runs it (`JobQueue::Client` → `push_sync` /
//! `schedule_sync` on the calling thread's synchronous connection), against a real Redis.

mod support;

use queue_core::link::blocking::SyncConn;
use queue_core::{client, Error};

use support::*;

#[test]
fn push_sync_lpushes_in_order_and_names_the_queue() {
    let t = TestRedis::start();
    let mut c = t.conn();
    let mut conn = SyncConn::new(&t.redis());
    let jobs: Vec<Vec<u8>> = (1..=3).map(|n| job("mailers", n)).collect();

    client::push_sync(&mut conn, "mailers", &jobs).expect("push");
    assert_eq!(queue_in_run_order(&mut c, "queue:mailers"), jobs);
    assert_eq!(smembers(&mut c, "queues"), vec!["mailers"]);

    // One more, later: it runs after the others.
    let later = job("mailers", 4);
    client::push_sync(&mut conn, "mailers", std::slice::from_ref(&later)).expect("push");
    assert_eq!(queue_in_run_order(&mut c, "queue:mailers")[3], later);
}

#[test]
fn an_empty_push_writes_nothing_and_a_bad_queue_name_is_refused() {
    let t = TestRedis::start();
    let mut c = t.conn();
    let mut conn = SyncConn::new(&t.redis());
    client::push_sync(&mut conn, "default", &[]).expect("empty push");
    assert!(all_keys(&mut c).is_empty(), "{:?}", all_keys(&mut c));

    for bad in ["", "two words", "tab\there"] {
        let e = client::push_sync(&mut conn, bad, &[job("x", 1)]).expect_err(bad);
        assert!(matches!(e, Error::InvalidArgument(_)), "{bad:?}: {e}");
    }
    assert!(all_keys(&mut c).is_empty());
}

#[test]
fn schedule_sync_scores_each_job_by_its_time() {
    let t = TestRedis::start();
    let mut c = t.conn();
    let mut conn = SyncConn::new(&t.redis());
    let (a, b) = (job("default", 1), job("default", 2));
    client::schedule_sync(
        &mut conn,
        &[(1_900_000_000.25, a.clone()), (1_800_000_000.5, b.clone())],
    )
    .expect("schedule");
    assert_eq!(
        zrange_scores(&mut c, "schedule"),
        vec![(b, 1_800_000_000.5), (a, 1_900_000_000.25)]
    );

    let e = client::schedule_sync(&mut conn, &[(f64::NAN, job("default", 3))])
        .expect_err("NaN is no time");
    assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
    assert_eq!(zrange_scores(&mut c, "schedule").len(), 2);
}

#[test]
fn a_namespace_prefixes_what_the_client_writes() {
    let t = TestRedis::with_namespace("resque:gitlab:");
    let mut c = t.conn();
    let mut conn = SyncConn::new(&t.redis());
    client::push_sync(&mut conn, "default", &[job("default", 1)]).expect("push");
    let mut keys = all_keys(&mut c);
    keys.sort();
    assert_eq!(
        keys,
        vec!["resque:gitlab:queue:default", "resque:gitlab:queues"]
    );
}

#[test]
fn push_new_sync_builds_the_job_from_its_template_in_sidekiq_field_order() {
    let t = TestRedis::start();
    let mut c = t.conn();
    let mut conn = SyncConn::new(&t.redis());
    let prefix = br#"{"retry":true,"queue":"default","class":"HardWorker""#;

    let pushed =
        client::push_new_sync(&mut conn, "default", prefix, br#"[1,"two"]"#, None).expect("push");
    let client::Pushed::Queued(jid) = pushed else {
        panic!("not queued: {pushed:?}")
    };
    let raw = queue_in_run_order(&mut c, "queue:default").remove(0);
    let text = String::from_utf8(raw).expect("utf-8");
    let job: serde_json::Value = serde_json::from_str(&text).expect("json");
    assert_eq!(job["jid"], jid.as_str());
    assert_eq!(jid.len(), 24);
    assert_eq!(job["args"], serde_json::json!([1, "two"]));
    assert_eq!(job["created_at"], job["enqueued_at"]);
    let order: Vec<usize> = [
        "\"retry\"",
        "\"class\"",
        "\"args\"",
        "\"jid\"",
        "\"created_at\"",
        "\"enqueued_at\"",
    ]
    .iter()
    .map(|field| text.find(field).expect(field))
    .collect();
    assert!(order.windows(2).all(|w| w[0] < w[1]), "{text}");
    assert_eq!(smembers(&mut c, "queues"), vec!["default"]);

    let e = client::push_new_sync(&mut conn, "default", b"{\"a\":1}", b"[]", None)
        .expect_err("a closed template");
    assert!(matches!(e, Error::InvalidJob(_)), "{e}");
}

/// `HardWorker` with `idempotent!`: keys held 60 s, the queue's flag read in Redis.
fn idempotent_hard_worker() -> queue_core::dedup::PushOptions {
    queue_core::dedup::PushOptions {
        class: "HardWorker".to_owned(),
        ttl: 60,
        idempotent: true,
        reschedule: false,
        flag: queue_core::dedup::FlagCheck::Redis,
    }
}

#[test]
fn push_new_sync_deduplicates_when_the_worker_does() {
    let t = TestRedis::start();
    let mut c = t.conn();
    let mut conn = SyncConn::new(&t.redis());
    let opts = idempotent_hard_worker();
    let prefix = br#"{"queue":"default","class":"HardWorker""#;
    let first =
        client::push_new_sync(&mut conn, "default", prefix, b"[7]", Some(&opts)).expect("first");
    let second =
        client::push_new_sync(&mut conn, "default", prefix, b"[7]", Some(&opts)).expect("second");
    assert!(matches!(first, client::Pushed::Queued(_)), "{first:?}");
    assert_eq!(second, client::Pushed::Dropped);
    assert_eq!(queue_in_run_order(&mut c, "queue:default").len(), 1);
    let key = format!(
        "duplicate:default:{}",
        queue_core::dedup::digest("HardWorker", b"[7]")
    );
    let holder: Option<String> = redis::cmd("GET").arg(&key).query(&mut c).expect("GET");
    let client::Pushed::Queued(jid) = first else {
        unreachable!()
    };
    assert_eq!(holder, Some(jid));
}

#[test]
fn push_bulk_new_sync_queues_a_batch_in_order_and_leaves_out_dropped_duplicates() {
    let t = TestRedis::start();
    let mut c = t.conn();
    let mut conn = SyncConn::new(&t.redis());
    let prefix = br#"{"queue":"default","class":"HardWorker""#;
    let args: Vec<Vec<u8>> = [&b"[1]"[..], b"[2]", b"[1]"]
        .iter()
        .map(|a| a.to_vec())
        .collect();

    let jids = client::push_bulk_new_sync(&mut conn, "default", prefix, &args, None).expect("push");
    let jobs: Vec<serde_json::Value> = queue_in_run_order(&mut c, "queue:default")
        .iter()
        .map(|raw| serde_json::from_slice(raw).expect("json"))
        .collect();
    assert_eq!(jobs.len(), 3);
    let run_jids: Vec<&str> = jobs
        .iter()
        .map(|j| j["jid"].as_str().expect("jid"))
        .collect();
    assert_eq!(
        run_jids,
        jids.iter().map(String::as_str).collect::<Vec<_>>()
    );
    let run_args: Vec<&serde_json::Value> = jobs.iter().map(|j| &j["args"]).collect();
    assert_eq!(
        run_args,
        [
            &serde_json::json!([1]),
            &serde_json::json!([2]),
            &serde_json::json!([1])
        ]
    );
    assert!(jobs
        .iter()
        .all(|j| j["created_at"] == jobs[0]["enqueued_at"]));
    assert_eq!(smembers(&mut c, "queues"), vec!["default"]);

    let _: () = redis::cmd("DEL")
        .arg("queue:default")
        .query(&mut c)
        .expect("DEL");
    let opts = idempotent_hard_worker();
    let jids = client::push_bulk_new_sync(&mut conn, "default", prefix, &args, Some(&opts))
        .expect("dedup push");
    let queued: Vec<serde_json::Value> = queue_in_run_order(&mut c, "queue:default")
        .iter()
        .map(|raw| serde_json::from_slice(raw).expect("json"))
        .collect();
    assert_eq!(jids.len(), 2, "the second [1] is dropped");
    assert_eq!(
        queued
            .iter()
            .map(|j| j["jid"].as_str().expect("jid"))
            .collect::<Vec<_>>(),
        jids.iter().map(String::as_str).collect::<Vec<_>>()
    );
    assert_eq!(queued[1]["args"], serde_json::json!([2]));

    let e = client::push_bulk_new_sync(&mut conn, "default", b"{\"a\":1}", &args, None)
        .expect_err("a closed template");
    assert!(matches!(e, Error::InvalidJob(_)), "{e}");
}

/// The pushes every `perform_async` makes, on the handle a Ruby thread pushes through (the shared
/// connection, `link::combining`), where each is written straight into one buffer and queued as it
/// is: a plain one, a deduplicated one (the script loaded after the server's `NOSCRIPT`), a drop,
/// and a duplicate of a worker that is not idempotent, which the one-job script leaves to the
/// general one (marked `duplicate-of`, in a second round trip).
#[test]
fn push_new_sync_on_the_shared_handle_queues_drops_and_marks() {
    let t = TestRedis::start();
    let mut c = t.conn();
    let mut conn = SyncConn::combined(&t.redis());
    let prefix = br#"{"retry":true,"queue":"default","class":"HardWorker""#;

    let plain = client::push_new_sync(&mut conn, "default", prefix, b"[1]", None).expect("plain");
    let opts = idempotent_hard_worker();
    let first =
        client::push_new_sync(&mut conn, "default", prefix, b"[7]", Some(&opts)).expect("first");
    let dropped =
        client::push_new_sync(&mut conn, "default", prefix, b"[7]", Some(&opts)).expect("drop");
    let marking = queue_core::dedup::PushOptions {
        idempotent: false,
        ..idempotent_hard_worker()
    };
    let marked = client::push_new_sync(&mut conn, "default", prefix, b"[7]", Some(&marking))
        .expect("marked");
    assert_eq!(dropped, client::Pushed::Dropped);
    let jids = queued_jids(&[&plain, &first, &marked]);
    let queued = queued_jobs(&mut c, "queue:default");
    assert_eq!(
        queued
            .iter()
            .map(|j| j["jid"].as_str().expect("jid"))
            .collect::<Vec<_>>(),
        jids.iter().map(String::as_str).collect::<Vec<_>>()
    );
    let key = format!(
        "duplicate:default:{}",
        queue_core::dedup::digest("HardWorker", b"[7]")
    );
    assert!(queued[0].get("idempotency_key").is_none());
    assert_eq!(queued[1]["idempotency_key"], key.as_str());
    assert_eq!(queued[2]["idempotency_key"], key.as_str());
    assert_eq!(queued[2]["duplicate-of"], jids[1].as_str());
    assert_eq!(smembers(&mut c, "queues"), vec!["default"]);
}

/// The jids of pushes that must all have been queued.
fn queued_jids(pushed: &[&client::Pushed]) -> Vec<String> {
    pushed
        .iter()
        .map(|p| match p {
            client::Pushed::Queued(jid) => jid.clone(),
            other => panic!("not queued: {other:?}"),
        })
        .collect()
}

/// The jobs in `list`, in the order they run, parsed.
fn queued_jobs(c: &mut redis::Connection, list: &str) -> Vec<serde_json::Value> {
    queue_in_run_order(c, list)
        .iter()
        .map(|raw| serde_json::from_slice(raw).expect("json"))
        .collect()
}

/// A template's kept bytes (`OnePush`) push, drop and hand a mark to the general script exactly as
/// the one-job path does without them; one that does not fit the push (made for another namespace,
/// or for a worker that drops where this one marks) is left aside.
#[test]
fn push_new_with_the_templates_kept_bytes_queues_drops_and_marks() {
    let t = TestRedis::with_namespace("resque:gitlab:");
    let mut c = t.conn();
    let mut conn = SyncConn::new(&t.redis());
    let prefix = br#"{"retry":true,"queue":"default","class":"HardWorker""#;
    let opts = idempotent_hard_worker();
    let keys = queue_core::keys::Keys::new("resque:gitlab:");
    let one = queue_core::dedup::OnePush::new(&keys, "default", &opts, prefix).expect("OnePush");
    let push = |conn: &mut SyncConn, args: &[u8], opts, one| {
        client::push_new_with(conn, "default", prefix, args, Some(opts), one).expect("push")
    };

    let first = push(&mut conn, b"[7]", &opts, Some(&one));
    assert_eq!(
        push(&mut conn, b"[7]", &opts, Some(&one)),
        client::Pushed::Dropped
    );
    let marking = queue_core::dedup::PushOptions {
        idempotent: false,
        ..idempotent_hard_worker()
    };
    let marked = push(&mut conn, b"[7]", &marking, Some(&one));
    let elsewhere = queue_core::keys::Keys::new("other:");
    let foreign = queue_core::dedup::OnePush::new(&elsewhere, "default", &opts, prefix)
        .expect("OnePush for another namespace");
    let other = push(&mut conn, b"[8]", &opts, Some(&foreign));

    let jids = queued_jids(&[&first, &marked, &other]);
    let queued = queued_jobs(&mut c, "resque:gitlab:queue:default");
    let key = |args: &[u8]| {
        format!(
            "resque:gitlab:duplicate:default:{}",
            queue_core::dedup::digest("HardWorker", args)
        )
    };
    assert_eq!(queued.len(), 3);
    for (job, jid) in queued.iter().zip(&jids) {
        assert_eq!(job["jid"], jid.as_str());
    }
    assert_eq!(queued[0]["idempotency_key"], key(b"[7]").as_str());
    assert_eq!(queued[1]["duplicate-of"], jids[0].as_str());
    assert_eq!(queued[2]["idempotency_key"], key(b"[8]").as_str());
    let holder: Option<String> = redis::cmd("GET")
        .arg(key(b"[8]"))
        .query(&mut c)
        .expect("GET");
    assert_eq!(holder.as_deref(), Some(jids[2].as_str()));
    assert_eq!(smembers(&mut c, "resque:gitlab:queues"), vec!["default"]);
}

/// A server error in reply to a packed push is that call's error, as it was for the pipeline.
#[test]
fn a_packed_push_meeting_a_server_error_fails_with_it() {
    let t = TestRedis::start();
    let mut c = t.conn();
    let _: () = redis::cmd("SET")
        .arg("queue:default")
        .arg("not a list")
        .query(&mut c)
        .expect("SET");
    let prefix = br#"{"queue":"default","class":"HardWorker""#;
    let conns = [SyncConn::new(&t.redis()), SyncConn::combined(&t.redis())];
    for (n, mut conn) in conns.into_iter().enumerate() {
        let e = client::push_new_sync(&mut conn, "default", prefix, b"[1]", None)
            .expect_err("LPUSH onto a string");
        assert!(
            matches!(e, Error::Redis { .. }) && e.to_string().contains("WRONGTYPE"),
            "{e}"
        );
        let opts = idempotent_hard_worker();
        let args = format!("[{n}]");
        let e = client::push_new_sync(&mut conn, "default", prefix, args.as_bytes(), Some(&opts))
            .expect_err("the script's LPUSH onto a string");
        assert!(matches!(e, Error::Redis { .. }), "{e}");
        // The connection is fine: the next push to another queue goes through.
        let pushed = client::push_new_sync(&mut conn, "other", prefix, b"[3]", None).expect("push");
        assert!(matches!(pushed, client::Pushed::Queued(_)), "{pushed:?}");
    }
}
