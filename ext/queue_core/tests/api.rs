//! The inspection API against a real Redis: pages by index, bounded filters, actions that move a job
//! exactly once, bulk actions in Sidekiq's order, processes and the daily history — under a namespace,
//! so every key is the engine's to name.

mod support;

use queue_core::api::sets::{self, Action, JobSet};
use queue_core::api::{processes, queues, stats};
use queue_core::client;
use queue_core::link::blocking::BlockingConn;

use support::*;

fn run<T>(
    t: &TestRedis,
    op: impl AsyncFnOnce(&mut queue_core::link::connection::Conn) -> queue_core::Result<T>,
) -> queue_core::Result<T> {
    BlockingConn::new(&t.redis()).expect("connection").run(op)
}

fn zadd(c: &mut redis::Connection, key: &str, score: f64, member: &[u8]) {
    redis::cmd("ZADD")
        .arg(key)
        .arg(score)
        .arg(member)
        .query::<i64>(c)
        .expect("ZADD");
}

#[test]
fn queue_pages_and_filters_are_by_index_and_bounded() {
    let t = TestRedis::with_namespace("ns:");
    let jobs: Vec<Vec<u8>> = (1..=30).map(|n| job("mail", n)).collect();
    run(&t, async |c| client::push(c, "mail", &jobs).await).expect("push");

    let page = run(&t, async |c| queues::page(c, "mail", 5, 10).await).expect("page");
    // Index 0 is the newest: the last pushed.
    assert_eq!(page.first().map(|j| text(j)), Some(text(&job("mail", 25))));
    assert_eq!(page.len(), 10);
    assert_eq!(
        run(&t, async |c| queues::names(c).await).unwrap(),
        vec!["mail".to_owned()]
    );

    // Job 3's jid is 000…003; "003" also appears in no other job of 1..=30.
    let needle = format!("{:024x}", 3);
    let first = run(&t, async |c| {
        queues::filter(c, "mail", &needle, 0, 20, 5).await
    })
    .unwrap();
    assert!(first.entries.is_empty(), "job 3 sits at index 27");
    assert_eq!(first.next, Some(20));
    let second = run(&t, async |c| {
        queues::filter(c, "mail", &needle, 20, 20, 5).await
    })
    .unwrap();
    assert_eq!(second.entries, vec![(job("mail", 3), 27.0)]);
    assert_eq!(second.next, None);
    assert!(
        run(&t, async |c| queues::filter(c, "mail", "x", 0, 20_000, 5)
            .await)
        .is_err()
    );

    assert!(run(&t, async |c| queues::delete(c, "mail", &job("mail", 3))
        .await)
    .unwrap());
    assert!(
        !run(&t, async |c| queues::delete(c, "mail", &job("mail", 3))
            .await)
        .unwrap()
    );
    run(&t, async |c| queues::clear(c, "mail").await).unwrap();
    let mut c = t.conn();
    assert!(!exists(&mut c, &t.key("queue:mail")));
    assert!(smembers(&mut c, &t.key("queues")).is_empty());
}

#[test]
fn actions_move_a_job_once_and_tell_same_score_twins_apart() {
    let t = TestRedis::with_namespace("ns:");
    let mut c = t.conn();
    let a = br#"{"class":"W","args":[1],"queue":"low","jid":"aaaaaaaaaaaaaaaaaaaaaaaa","retry_count":3,"big":123456789012345678901234567890}"#;
    let b = br#"{"class":"W","args":[2],"queue":"low","jid":"bbbbbbbbbbbbbbbbbbbbbbbb","retry_count":0}"#;
    zadd(&mut c, &t.key("retry"), 100.5, a);
    zadd(&mut c, &t.key("retry"), 100.5, b);

    let moved = run(&t, async |c| {
        sets::act(
            c,
            JobSet::Retry,
            Action::Retry,
            None,
            100.5,
            "aaaaaaaaaaaaaaaaaaaaaaaa",
        )
        .await
    })
    .unwrap();
    assert!(moved);
    let queued = lrange(&mut c, &t.key("queue:low"));
    assert_eq!(queued.len(), 1);
    let pushed = text(&queued[0]);
    assert!(pushed.contains(r#""retry_count":2"#), "{pushed}");
    assert!(
        pushed.contains("123456789012345678901234567890"),
        "{pushed}"
    );
    assert!(pushed.contains(r#""enqueued_at":"#), "{pushed}");
    assert_eq!(zmembers(&mut c, &t.key("retry")), vec![b.to_vec()]);
    assert_eq!(smembers(&mut c, &t.key("queues")), vec!["low".to_owned()]);

    // A second operator acting on the same member moves nothing.
    let again = run(&t, async |c| {
        sets::act_on(c, JobSet::Retry, Action::Retry, &[a.to_vec()]).await
    })
    .unwrap();
    assert_eq!(again, 0);

    let killed = run(&t, async |c| {
        sets::act(
            c,
            JobSet::Retry,
            Action::Kill,
            Some(b),
            100.5,
            "bbbbbbbbbbbbbbbbbbbbbbbb",
        )
        .await
    })
    .unwrap();
    assert!(killed);
    assert_eq!(zmembers(&mut c, &t.key("dead")), vec![b.to_vec()]);
    assert_eq!(
        run(&t, async |c| sets::size(c, JobSet::Retry).await).unwrap(),
        0
    );
}

#[test]
fn pages_scans_and_bulk_retries_follow_sidekiqs_order() {
    let t = TestRedis::start();
    let mut c = t.conn();
    for n in 1..=250 {
        zadd(&mut c, "dead", 1000.0 + n as f64, &job("q", n));
    }
    zadd(&mut c, "dead", 5000.0, b"not json");

    let page = run(&t, async |c| sets::page(c, JobSet::Dead, 1, 3).await).unwrap();
    assert_eq!(
        page,
        vec![
            (job("q", 250), 1250.0),
            (job("q", 249), 1249.0),
            (job("q", 248), 1248.0)
        ]
    );
    let found = run(&t, async |c| {
        sets::filter(c, JobSet::Dead, &format!("{:024x}", 7), 0, 1000, 10).await
    })
    .unwrap();
    assert_eq!(found.entries, vec![(job("q", 7), 1007.0)]);
    let (_, scanned) = run(&t, async |c| {
        sets::scan(c, JobSet::Dead, "*not json*", 0, 1000).await
    })
    .unwrap();
    assert_eq!(scanned, vec![(b"not json".to_vec(), 5000.0)]);

    let moved = run(&t, async |c| {
        sets::act_on_all(c, JobSet::Dead, Action::Retry).await
    })
    .unwrap();
    assert_eq!(moved, 250);
    // Latest first, as Sidekiq's retry_all: the oldest death ends up nearest the head.
    let queued = lrange(&mut c, "queue:q");
    assert_eq!(queued.len(), 250);
    assert!(text(&queued[0]).contains(&format!("{:024x}", 1)));
    // What is not a job stays where it was.
    assert_eq!(zmembers(&mut c, "dead"), vec![b"not json".to_vec()]);
}

#[test]
fn processes_work_signals_and_history() {
    let t = TestRedis::start();
    let mut c = t.conn();
    let _: () = redis::pipe()
        .cmd("SADD")
        .arg("processes")
        .arg(&["h:1:a", "h:2:gone"])
        .ignore()
        .cmd("HSET")
        .arg("h:1:a")
        .arg(&[
            "info",
            r#"{"identity":"h:1:a"}"#,
            "busy",
            "2",
            "beat",
            "12.5",
            "quiet",
            "false",
        ])
        .ignore()
        .cmd("HSET")
        .arg("h:1:a:workers")
        .arg(&["t1", r#"{"queue":"q","run_at":1}"#])
        .ignore()
        .cmd("SET")
        .arg(format!("stat:processed:{}", today()))
        .arg(9)
        .ignore()
        .query(&mut c)
        .expect("fill");

    let rows = run(&t, async |c| processes::list(c).await).unwrap();
    assert_eq!(rows.len(), 2);
    assert_eq!((rows[0].busy, rows[0].beat), (2, 12.5));
    assert_eq!(rows[1].info, None);
    let work = run(&t, async |c| processes::work(c).await).unwrap();
    assert_eq!(
        work,
        vec![(
            "h:1:a".into(),
            "t1".into(),
            r#"{"queue":"q","run_at":1}"#.into()
        )]
    );
    assert_eq!(run(&t, async |c| processes::cleanup(c).await).unwrap(), 1);
    assert_eq!(smembers(&mut c, "processes"), vec!["h:1:a".to_owned()]);
    run(&t, async |c| processes::signal(c, "h:1:a", "TSTP").await).unwrap();
    assert_eq!(lrange(&mut c, "h:1:a-signals"), vec![b"TSTP".to_vec()]);
    assert!(run(&t, async |c| processes::signal(c, "h:1:a", "KILL").await).is_err());

    let s = run(&t, async |c| stats::stats(c).await).unwrap();
    assert_eq!((s.workers_size, s.processes_size), (2, 1));
    let days = vec![today(), "2000-01-01".to_owned()];
    let counts = run(&t, async |c| {
        stats::history(c, stats::Counter::Processed, &days).await
    })
    .unwrap();
    assert_eq!(counts, vec![9, 0]);
}
