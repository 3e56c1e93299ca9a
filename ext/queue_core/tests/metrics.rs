//! Prometheus metrics against a real Redis: fetchers count per class and queue in memory, the server
//! flushes the counts to `jq:metrics` with its liveness beat and on stop, the dedup script counts its
//! drops, and a scrape reads the counters and gauges and encodes them (the text is parsed back here).

mod support;

use std::collections::HashMap;
use std::time::Duration;

use queue_core::clock::now_f64;
use queue_core::dedup::{self, DedupJob, FlagCheck, PushOptions};
use queue_core::fetch::Fetcher;
use queue_core::link::blocking::{BlockingConn, SyncConn};
use queue_core::metrics::{self, OrderedWorker};
use queue_core::ordered::OrderedQueue;
use queue_core::retry::{Failure, RetryIn};
use queue_core::server::Server;
use queue_core::{client, Redis};

use support::*;

const IDENTITY: &str = "host:123:abcdefabcdef";

fn push(redis: &Redis, queue: &str, jobs: &[Vec<u8>]) {
    let mut bc = BlockingConn::new(redis).expect("blocking connection");
    bc.run(async |c| client::push(c, queue, jobs).await)
        .expect("push");
}

fn job(class: &str, queue: &str, n: usize) -> Vec<u8> {
    format!(r#"{{"class":"{class}","args":[{n}],"queue":"{queue}","jid":"j{n}{class}","retry":false,"enqueued_at":{}}}"#, now_f64())
        .into_bytes()
}

fn boom() -> Failure {
    Failure {
        error_class: "RuntimeError".to_owned(),
        error_message: "boom".to_owned(),
        backtrace: Vec::new(),
        retry_in: RetryIn::Default,
        worker_retry: None,
    }
}

fn server(t: &TestRedis, queues: &[(&str, u32)]) -> Server {
    let mut config = server_config(IDENTITY, queues);
    config.concurrency = 1;
    config.max_batch = 1;
    Server::start(t.redis(), config).expect("server starts")
}

/// Runs the next job: done, or failed when `fail`.
fn run_one(fetcher: &mut Fetcher, fail: bool) {
    fetcher
        .next(Duration::from_secs(5))
        .expect("fetch")
        .expect("a job");
    if fail {
        fetcher.fail(&boom()).expect("filed");
    } else {
        fetcher.done();
    }
}

fn hash(t: &TestRedis) -> HashMap<String, String> {
    redis::cmd("HGETALL")
        .arg(t.key("jq:metrics"))
        .query(&mut t.conn())
        .expect("HGETALL")
}

/// The samples of an exposition: `name{labels}` → value.
fn samples(text: &str) -> HashMap<String, f64> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| {
            let (name, value) = l.rsplit_once(' ').expect("a sample line");
            (name.to_owned(), value.parse::<f64>().expect("a number"))
        })
        .collect()
}

fn scrape_text(t: &TestRedis, ordered: &[OrderedWorker]) -> String {
    let mut conn = SyncConn::new(&t.redis());
    metrics::text(&mut conn, ordered).expect("scrape")
}

#[test]
fn jobs_are_counted_per_class_and_queue_and_flushed_on_stop() {
    let t = TestRedis::start();
    let redis = t.redis();
    push(
        &redis,
        "default",
        &[job("A", "default", 1), job("A", "default", 2)],
    );
    push(&redis, "default", &[job("B", "default", 3)]);
    push(&redis, "low", &[job("A", "low", 4)]);
    let server = server(&t, &[("default", 1), ("low", 1)]);
    let mut fetcher = server.fetcher("t1").expect("fetcher");
    // The queues are drawn by weight: run all four, failing B.
    for _ in 0..4 {
        let (_, raw) = fetcher
            .next(Duration::from_secs(5))
            .expect("fetch")
            .expect("a job");
        let needle = br#""class":"B""#;
        if raw.windows(needle.len()).any(|w| w == needle) {
            fetcher.fail(&boom()).expect("filed");
        } else {
            fetcher.done();
        }
    }
    fetcher.close().expect("close");
    drop(fetcher);
    server.stop().expect("stop");

    let h = hash(&t);
    assert_eq!(h.get("p:7:default:A").map(String::as_str), Some("2"));
    assert_eq!(h.get("f:7:default:B").map(String::as_str), Some("1"));
    assert_eq!(h.get("p:3:low:A").map(String::as_str), Some("1"));
    assert_eq!(h.get("p:7:default:B"), None, "zero counts are not written");

    let text = scrape_text(&t, &[]);
    let s = samples(&text);
    let get = |k: &str| *s.get(k).unwrap_or_else(|| panic!("{k} missing in\n{text}"));
    assert_eq!(
        get(r#"queue_jobs_processed_total{class="A",queue="default"}"#),
        2.0
    );
    assert_eq!(
        get(r#"queue_jobs_processed_total{class="A",queue="low"}"#),
        1.0
    );
    assert_eq!(
        get(r#"queue_jobs_failed_total{class="B",queue="default"}"#),
        1.0
    );
    assert_eq!(
        get(r#"queue_jobs_failed_total{class="A",queue="default"}"#),
        0.0
    );
    assert_eq!(
        get(r#"queue_job_duration_seconds_count{class="A",queue="default"}"#),
        2.0
    );
    assert_eq!(
        get(r#"queue_job_duration_seconds_bucket{le="+Inf",class="A",queue="default"}"#),
        2.0
    );
    assert_eq!(
        get(r#"queue_job_duration_seconds_bucket{le="300.0",class="A",queue="default"}"#),
        2.0,
        "blank jobs take well under 300 s\n{text}"
    );
    assert_eq!(get("queue_dead_size"), 0.0, "retry: false discards");
    assert!(text.contains("# TYPE queue_job_duration_seconds histogram"));
    assert!(text.contains("# TYPE queue_jobs_processed counter"));
    assert!(text.ends_with("# EOF\n"));
}

#[test]
fn a_running_server_flushes_with_its_liveness_beat() {
    let t = TestRedis::start();
    push(&t.redis(), "default", &[job("A", "default", 1)]);
    let server = server(&t, &[("default", 1)]);
    let mut fetcher = server.fetcher("t1").expect("fetcher");
    run_one(&mut fetcher, false);
    wait_for("the beat to flush the count", || {
        hash(&t).get("p:7:default:A").map(String::as_str) == Some("1")
    });
    // Flushed deltas are not added again.
    push(&t.redis(), "default", &[job("A", "default", 2)]);
    run_one(&mut fetcher, false);
    fetcher.close().expect("close");
    drop(fetcher);
    server.stop().expect("stop");
    assert_eq!(hash(&t).get("p:7:default:A").map(String::as_str), Some("2"));
}

#[test]
fn dedup_drops_are_counted_by_the_push_script() {
    let t = TestRedis::start();
    let mut conn = SyncConn::new(&t.redis());
    let opts = PushOptions {
        class: "Idem::Worker".to_owned(),
        ttl: 600,
        idempotent: true,
        reschedule: false,
        flag: FlagCheck::Redis,
    };
    let dup = |jid: &str| DedupJob {
        jid: jid.to_owned(),
        json: format!(r#"{{"class":"Idem::Worker","args":[1],"queue":"default","jid":"{jid}"}}"#)
            .into_bytes(),
        args: b"[1]".to_vec(),
        at: None,
    };
    dedup::push_sync(&mut conn, "default", &opts, &[dup("a"), dup("b"), dup("c")]).expect("push");
    dedup::push_sync(&mut conn, "default", &opts, &[dup("d")]).expect("push");
    assert_eq!(
        hash(&t).get("d:7:default:Idem::Worker").map(String::as_str),
        Some("3")
    );
    let s = samples(&scrape_text(&t, &[]));
    assert_eq!(
        s[r#"queue_dedup_dropped_total{class="Idem::Worker",queue="default"}"#],
        3.0
    );
}

#[test]
fn gauges_come_from_the_queues_sets_processes_and_ordered_morgues() {
    let t = TestRedis::start();
    let mut c = t.conn();
    let old = format!(
        r#"{{"class":"W","args":[],"queue":"waiting","jid":"old","enqueued_at":{}}}"#,
        now_f64() - 100.0
    );
    push(
        &t.redis(),
        "waiting",
        &[old.into_bytes(), job("W", "waiting", 2)],
    );
    push(&t.redis(), "empty", &[job("W", "empty", 3)]);
    redis::cmd("LPOP")
        .arg(t.key("queue:empty"))
        .exec(&mut c)
        .expect("LPOP");
    for (set, n) in [("schedule", 1), ("retry", 2), ("dead", 3)] {
        for i in 0..n {
            redis::cmd("ZADD")
                .arg(t.key(set))
                .arg(i)
                .arg(format!("{{\"jid\":\"{set}{i}\"}}"))
                .exec(&mut c)
                .expect("ZADD");
        }
    }
    let ordered = OrderedQueue::new(t.namespace(), "orders", 4).expect("queue");
    for id in ["1", "2"] {
        redis::cmd("ZADD")
            .arg(ordered.keys().morgue_all_ids_scored_by_updated_at())
            .arg(1)
            .arg(id)
            .exec(&mut c)
            .expect("ZADD");
    }
    // A second namespace-less, Sidekiq-shaped process whose hash expired: not counted.
    redis::cmd("SADD")
        .arg(t.key("processes"))
        .arg("gone:1:x")
        .exec(&mut c)
        .expect("SADD");
    let server = server(&t, &[("other", 1)]);
    redis::cmd("SADD")
        .arg(t.key("jq:paused"))
        .arg("waiting")
        .arg("never_pushed")
        .exec(&mut c)
        .expect("SADD");

    let text = scrape_text(
        &t,
        &[OrderedWorker {
            name: "Orders\"Sync".to_owned(),
            queue: ordered,
        }],
    );
    let s = samples(&text);
    assert_eq!(s[r#"queue_queue_size{queue="waiting"}"#], 2.0);
    assert_eq!(s[r#"queue_queue_size{queue="empty"}"#], 0.0);
    let latency = s[r#"queue_queue_latency_seconds{queue="waiting"}"#];
    assert!((100.0..110.0).contains(&latency), "{latency}");
    assert_eq!(s[r#"queue_queue_latency_seconds{queue="empty"}"#], 0.0);
    assert_eq!(s[r#"queue_queue_paused{queue="waiting"}"#], 1.0);
    assert_eq!(s[r#"queue_queue_paused{queue="empty"}"#], 0.0);
    assert_eq!(s[r#"queue_queue_paused{queue="never_pushed"}"#], 1.0);
    assert_eq!(s[r#"queue_queue_size{queue="never_pushed"}"#], 0.0);
    assert_eq!(s["queue_scheduled_size"], 1.0);
    assert_eq!(s["queue_retry_size"], 2.0);
    assert_eq!(s["queue_dead_size"], 3.0);
    assert_eq!(s["queue_processes"], 1.0, "{text}");
    assert_eq!(s["queue_busy"], 0.0);
    assert_eq!(
        s[r#"queue_ordered_morgue_size{worker="Orders\"Sync"}"#], 2.0,
        "the label value is escaped by the crate\n{text}"
    );
    server.stop().expect("stop");
}

/// 2025-02-14 08:03 UTC, as epoch minutes.
const FEB14_0803: i64 = 1_739_520_180 / 60;

/// `HGETALL` of `key` (namespaced by `t`).
fn hgetall(t: &TestRedis, key: &str) -> HashMap<String, String> {
    redis::cmd("HGETALL")
        .arg(t.key(key))
        .query(&mut t.conn())
        .expect("HGETALL")
}

/// The 26 `u16` counters of a Sidekiq histogram, read as Sidekiq's `Histogram#fetch` reads them.
fn histogram(t: &TestRedis, key: &str) -> Vec<u64> {
    let mut cmd = redis::cmd("BITFIELD_RO");
    cmd.arg(t.key(key));
    for i in 0..26 {
        cmd.arg("GET").arg("u16").arg(format!("#{i}"));
    }
    cmd.query(&mut t.conn()).expect("BITFIELD_RO")
}

fn ttl(t: &TestRedis, key: &str) -> i64 {
    redis::cmd("TTL")
        .arg(t.key(key))
        .query(&mut t.conn())
        .expect("TTL")
}

/// Counts three jobs of `HardJob` (31 ms, 280 ms, and a failure) and one of an ActiveJob-wrapped
/// `MyJob` (5 ms) in the minute 2025-02-14 08:03 UTC, and flushes them.
fn flush_fixture(t: &TestRedis, version: metrics::sidekiq::Version) {
    let m = metrics::Metrics::with_sidekiq(vec!["default".into(), "low".into()], Some(version));
    let tally = m.tally();
    {
        let mut tally = tally.lock().expect("tally");
        let hard = br#"{"class":"HardJob","args":[]}"#;
        let minute = Some(FEB14_0803);
        tally.record_at(0, hard, None, Duration::from_micros(31_900), true, minute);
        tally.record_at(1, hard, None, Duration::from_millis(280), true, minute);
        tally.record_at(0, hard, None, Duration::from_secs(2), false, minute);
        let wrapped = br#"{"class":"Sidekiq::ActiveJob::Wrapper","wrapped":"MyJob","args":[]}"#;
        tally.record_at(0, wrapped, None, Duration::from_millis(5), true, minute);
    }
    let mut bc = BlockingConn::new(&t.redis()).expect("blocking connection");
    let wrote = bc
        .run(async |c| metrics::flush::flush(c, &m).await)
        .expect("flush");
    assert!(wrote);
}

fn fields(pairs: &[(&str, &str)]) -> HashMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

/// The figures of [`flush_fixture`], by hand from Sidekiq 7.3.10's `tracking.rb` and `shared.rb`:
/// `p` counts the failure too, `ms` and the histogram only the successes (31 + 280 ms; 5 ms).
fn expected_counts() -> HashMap<String, String> {
    fields(&[
        ("HardJob|p", "3"),
        ("HardJob|f", "1"),
        ("HardJob|ms", "311"),
        ("MyJob|p", "1"),
        ("MyJob|ms", "5"),
    ])
}

fn expected_histogram(ones: &[usize]) -> Vec<u64> {
    (0..26).map(|i| u64::from(ones.contains(&i))).collect()
}

#[test]
fn sidekiq_7_metrics_are_written_in_its_keys() {
    for namespace in ["", "ns:"] {
        let t = TestRedis::with_namespace(namespace);
        flush_fixture(&t, metrics::sidekiq::Version::V7);
        assert_eq!(hgetall(&t, "j|20250214|8:3"), expected_counts());
        // 31 ms < 45: bucket 2; 280 ms < 335: bucket 7 ("if a job takes 280ms, it'll increment
        // bucket[7]"); 5 ms: bucket 0.
        assert_eq!(
            histogram(&t, "HardJob-14-08:3"),
            expected_histogram(&[2, 7])
        );
        assert_eq!(histogram(&t, "MyJob-14-08:3"), expected_histogram(&[0]));
        for key in ["j|20250214|8:3", "HardJob-14-08:3", "MyJob-14-08:3"] {
            let left = ttl(&t, key);
            assert!(
                (8 * 3600 - 60..=8 * 3600).contains(&left),
                "{key} TTL {left}"
            );
        }
        // A second flush adds (HINCRBY, BITFIELD INCRBY), as a second Sidekiq process would.
        flush_fixture(&t, metrics::sidekiq::Version::V7);
        assert_eq!(
            hgetall(&t, "j|20250214|8:3")
                .get("HardJob|p")
                .map(String::as_str),
            Some("6")
        );
        assert_eq!(histogram(&t, "HardJob-14-08:3")[7], 2);
    }
}

#[test]
fn sidekiq_8_metrics_are_written_in_its_keys() {
    let t = TestRedis::start();
    flush_fixture(&t, metrics::sidekiq::Version::V8);
    assert_eq!(hgetall(&t, "j|250214|8:03"), expected_counts());
    assert_eq!(
        hgetall(&t, "j|250214|8:0"),
        expected_counts(),
        "ten-minute rollup"
    );
    assert_eq!(
        histogram(&t, "h|HardJob-14-8:3"),
        expected_histogram(&[2, 7])
    );
    assert_eq!(histogram(&t, "h|MyJob-14-8:3"), expected_histogram(&[0]));
    assert!((72 * 3600 - 60..=72 * 3600).contains(&ttl(&t, "j|250214|8:0")));
    assert!((8 * 3600 - 60..=8 * 3600).contains(&ttl(&t, "j|250214|8:03")));
    assert!((8 * 3600 - 60..=8 * 3600).contains(&ttl(&t, "h|HardJob-14-8:3")));
    assert!(
        hgetall(&t, "j|20250214|8:3").is_empty(),
        "no Sidekiq 7 keys with 8"
    );
}

#[test]
fn a_server_writes_sidekiq_metrics_under_the_minute_each_job_finished() {
    let t = TestRedis::start();
    push(
        &t.redis(),
        "default",
        &[job("A", "default", 1), job("A", "default", 2)],
    );
    let mut config = server_config(IDENTITY, &[("default", 1)]);
    config.concurrency = 1;
    config.max_batch = 1;
    config.sidekiq_metrics = Some(metrics::sidekiq::Version::V7);
    let server = Server::start(t.redis(), config).expect("server starts");
    let mut fetcher = server.fetcher("t1").expect("fetcher");
    let before = metrics::sidekiq::now_minute();
    run_one(&mut fetcher, false);
    run_one(&mut fetcher, true);
    let after = metrics::sidekiq::now_minute();
    fetcher.close().expect("close");
    drop(fetcher);
    server.stop().expect("stop");

    let keys = queue_core::keys::Keys::new("");
    let mut p = 0;
    let mut f = 0;
    for minute in before..=after {
        let (hash, _) = metrics::sidekiq::count_keys(&keys, metrics::sidekiq::Version::V7, minute)
            .expect("key")
            .remove(0);
        let h = hgetall(&t, &hash);
        p += h
            .get("A|p")
            .map_or(0, |v| v.parse::<u64>().expect("a number"));
        f += h
            .get("A|f")
            .map_or(0, |v| v.parse::<u64>().expect("a number"));
    }
    assert_eq!((p, f), (2, 1));
    assert_eq!(
        hash(&t).get("p:7:default:A").map(String::as_str),
        Some("1"),
        "the Prometheus counters are still written"
    );
}

#[test]
fn no_sidekiq_metrics_when_off() {
    let t = TestRedis::start();
    push(&t.redis(), "default", &[job("A", "default", 1)]);
    let server = server(&t, &[("default", 1)]);
    let mut fetcher = server.fetcher("t1").expect("fetcher");
    run_one(&mut fetcher, false);
    fetcher.close().expect("close");
    drop(fetcher);
    server.stop().expect("stop");
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg("*")
        .query(&mut t.conn())
        .expect("KEYS");
    assert!(
        !keys
            .iter()
            .any(|k| k.starts_with("j|") || k.starts_with("A-")),
        "{keys:?}"
    );
}
