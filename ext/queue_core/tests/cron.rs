//! Cron schedules against a real Redis, stored as sidekiq-cron 1.8 stores them: a tick is pushed
//! once however many processes run the turn; disabled schedules are not pushed; `last_enqueue_time`
//! and `jid_history` are written in sidekiq-cron's formats; missed ticks are skipped; a turn with
//! nothing due costs no per-schedule command.

mod support;

use std::sync::{Arc, Barrier};
use std::thread;

use queue_core::clock::now_f64;
use queue_core::cron::Crontab;
use queue_core::link::blocking::BlockingConn;

use support::*;

/// A schedule as `Sidekiq::Cron::Job#save` writes it.
fn store(c: &mut redis::Connection, t: &TestRedis, name: &str, cron: &str, status: &str) {
    let key = format!("cron_job:{name}");
    let message = r#"{"retry":true,"queue":"cronq","class":"CronWorker","args":[]}"#;
    redis::cmd("HSET")
        .arg(t.key(&key))
        .arg(&[
            ("name", name),
            ("klass", "CronWorker"),
            ("cron", cron),
            ("description", ""),
            ("args", r#"["x",1]"#),
            ("date_as_argument", "false"),
            ("message", message),
            ("status", status),
            ("active_job", "false"),
            ("queue_name_prefix", ""),
            ("queue_name_delimiter", ""),
            ("last_enqueue_time", ""),
            ("symbolize_args", "false"),
        ])
        .exec(c)
        .expect("HSET");
    redis::cmd("SADD")
        .arg(t.key("cron_jobs"))
        .arg(&key)
        .exec(c)
        .expect("SADD");
}

fn turn(bc: &mut BlockingConn, tab: &mut Crontab, now: f64) -> usize {
    bc.run(async |c| tab.turn(c, now).await)
        .expect("cron turn")
        .pushed
}

#[test]
fn three_processes_push_each_tick_once() {
    let t = TestRedis::start();
    let mut c = t.conn();
    store(&mut c, &t, "every_second", "* * * * * *", "enabled");
    let start = Arc::new(Barrier::new(3));
    let until = now_f64().floor() + 4.0;
    let handles: Vec<_> = (0..3)
        .map(|_| {
            let redis = t.redis();
            let start = Arc::clone(&start);
            thread::spawn(move || {
                let mut bc = BlockingConn::new(&redis).expect("blocking connection");
                let mut tab = Crontab::new();
                let mut pushed = 0;
                start.wait();
                while now_f64() < until {
                    pushed += turn(&mut bc, &mut tab, now_f64());
                    thread::sleep(std::time::Duration::from_millis(5));
                }
                pushed
            })
        })
        .collect();
    let pushed: usize = handles
        .into_iter()
        .map(|h| h.join().expect("a turn thread"))
        .sum();
    let jobs = lrange(&mut c, &t.key("queue:cronq"));
    let ticks = zrange_scores(&mut c, &t.key("cron_job:every_second:enqueued"));
    assert!(pushed >= 4, "ticks pushed: {pushed}");
    assert_eq!(jobs.len(), pushed, "one job per push");
    assert_eq!(ticks.len(), pushed, "one claimed tick per push");
    // One tick per second, no second claimed twice.
    let mut seconds: Vec<i64> = ticks.iter().map(|(_, s)| *s as i64).collect();
    seconds.dedup();
    assert_eq!(seconds.len(), ticks.len());
    assert_eq!(smembers(&mut c, &t.key("queues")), vec!["cronq".to_owned()]);
}

#[test]
fn a_tick_is_written_as_sidekiq_cron_writes_it() {
    let t = TestRedis::start();
    let mut c = t.conn();
    store(&mut c, &t, "minutely", "* * * * *", "enabled");
    let mut bc = BlockingConn::new(&t.redis()).expect("blocking connection");
    let mut tab = Crontab::new();
    // 2023-11-14 22:13:20 UTC: the tick of 22:13:00 is 20 s old, within the window.
    let now = 1700000000.25;
    assert_eq!(turn(&mut bc, &mut tab, now), 1);
    assert_eq!(turn(&mut bc, &mut tab, now + 1.0), 0, "the same tick twice");

    let ticks = zrange_scores(&mut c, &t.key("cron_job:minutely:enqueued"));
    assert_eq!(
        ticks,
        vec![(b"2023-11-14T22:13:00Z".to_vec(), 1699999980.0)]
    );
    assert_eq!(
        hget(&mut c, &t.key("cron_job:minutely"), "last_enqueue_time").as_deref(),
        Some("2023-11-14 22:13:20 +0000")
    );
    let job: serde_json::Value =
        serde_json::from_slice(&lrange(&mut c, &t.key("queue:cronq"))[0]).expect("job JSON");
    assert_eq!(job["class"], "CronWorker");
    assert_eq!(job["args"], serde_json::json!(["x", 1]));
    assert_eq!(job["queue"], "cronq");
    assert_eq!(job["retry"], true);
    assert_eq!(job["enqueued_at"], serde_json::json!(1700000000.25));
    let history = lrange(&mut c, &t.key("cron_job:minutely:jid_history"));
    let entry: serde_json::Value = serde_json::from_slice(&history[0]).expect("history JSON");
    assert_eq!(
        entry,
        serde_json::json!({"jid": job["jid"], "enqueued": "2023-11-14 22:13:20 +0000"})
    );
}

#[test]
fn history_keeps_ten_and_day_old_ticks_are_forgotten() {
    let t = TestRedis::start();
    let mut c = t.conn();
    store(&mut c, &t, "minutely", "* * * * *", "enabled");
    let mut bc = BlockingConn::new(&t.redis()).expect("blocking connection");
    let mut tab = Crontab::new();
    let start = 1700000000.0;
    for minute in 0..12 {
        assert_eq!(turn(&mut bc, &mut tab, start + 60.0 * minute as f64), 1);
    }
    assert_eq!(
        lrange(&mut c, &t.key("cron_job:minutely:jid_history")).len(),
        10
    );
    assert_eq!(
        turn(&mut bc, &mut tab, start + 86_400.0 + 3600.0),
        1,
        "a day later"
    );
    let ticks = zrange_scores(&mut c, &t.key("cron_job:minutely:enqueued"));
    assert_eq!(ticks.len(), 1, "{ticks:?}");
}

#[test]
fn disabled_schedules_are_not_pushed_and_enabling_needs_no_refresh() {
    let t = TestRedis::start();
    let mut c = t.conn();
    store(&mut c, &t, "off", "* * * * *", "disabled");
    let mut bc = BlockingConn::new(&t.redis()).expect("blocking connection");
    let mut tab = Crontab::new();
    let now = 1700000000.0;
    assert_eq!(turn(&mut bc, &mut tab, now), 0);
    redis::cmd("HSET")
        .arg(t.key("cron_job:off"))
        .arg("status")
        .arg("enabled")
        .exec(&mut c)
        .expect("HSET");
    assert_eq!(turn(&mut bc, &mut tab, now + 60.0), 1);
    assert_eq!(llen(&mut c, &t.key("queue:cronq")), 1);
}

#[test]
fn after_downtime_missed_ticks_are_skipped() {
    let t = TestRedis::start();
    let mut c = t.conn();
    store(&mut c, &t, "minutely", "* * * * *", "enabled");
    let mut bc = BlockingConn::new(&t.redis()).expect("blocking connection");
    let mut tab = Crontab::new();
    let now = 1700000000.0;
    assert_eq!(turn(&mut bc, &mut tab, now), 1);
    // An hour with no turn: one push for the current tick, not sixty.
    assert_eq!(turn(&mut bc, &mut tab, now + 3600.0), 1);
    assert_eq!(llen(&mut c, &t.key("queue:cronq")), 2);
    // A schedule whose latest tick is older than the window is not pushed at all.
    store(&mut c, &t, "hourly", "0 * * * *", "enabled");
    let mut fresh = Crontab::new();
    // 23:23:20: the minutely one runs, the hourly one's 23:00 tick is 23 minutes old.
    assert_eq!(turn(&mut bc, &mut fresh, now + 3600.0 + 600.0), 1);
    assert!(!exists(&mut c, &t.key("cron_job:hourly:enqueued")));
}

#[test]
fn a_catch_up_schedule_runs_its_latest_missed_tick_once() {
    let t = TestRedis::start();
    let mut c = t.conn();
    // Both saved at 2023-11-14 22:13:20 UTC (the save claims the day's tick, as sidekiq-cron's does).
    let saved = 1700000000.0;
    for name in ["skips", "catches_up"] {
        store(&mut c, &t, name, "0 3 * * * UTC", "enabled");
        redis::cmd("ZADD")
            .arg(t.key(&format!("cron_job:{name}:enqueued")))
            .arg(1699930800.0)
            .arg("2023-11-14T03:00:00Z")
            .exec(&mut c)
            .expect("ZADD");
    }
    redis::cmd("HSET")
        .arg(t.key("cron_job:catches_up"))
        .arg("catch_up")
        .arg("true")
        .exec(&mut c)
        .expect("HSET");
    let mut bc = BlockingConn::new(&t.redis()).expect("blocking connection");
    // Down from before the 15th's 03:00 tick (and the 16th's) until 10:00 on the 16th: the skipping
    // schedule pushes nothing, the catch-up one its latest missed tick, the 16th's, once.
    let back = saved + 86_400.0 + 11.0 * 3600.0 + 46.0 * 60.0 + 40.0;
    let mut tab = Crontab::new();
    assert_eq!(turn(&mut bc, &mut tab, back), 1);
    assert_eq!(turn(&mut bc, &mut tab, back + 1.0), 0);
    let ticks = zrange_scores(&mut c, &t.key("cron_job:catches_up:enqueued"));
    assert_eq!(
        ticks.last().map(|(m, _)| m.clone()),
        Some(b"2023-11-16T03:00:00Z".to_vec())
    );
    assert_eq!(ticks.len(), 1, "the day-old claim forgotten: {ticks:?}");
    assert_eq!(
        zrange_scores(&mut c, &t.key("cron_job:skips:enqueued")).len(),
        1
    );
    assert_eq!(llen(&mut c, &t.key("queue:cronq")), 1);
    // Another process that builds its index (a new leader) finds the tick claimed: no second push.
    let mut other = Crontab::new();
    assert_eq!(turn(&mut bc, &mut other, back + 2.0), 0);
    // Both run at their next tick.
    assert_eq!(turn(&mut bc, &mut tab, back + 17.0 * 3600.0), 2);
}

#[test]
fn run_now_pushes_whatever_the_status_and_claims_no_tick() {
    let t = TestRedis::start();
    let mut c = t.conn();
    store(&mut c, &t, "off", "0 3 * * *", "disabled");
    let mut bc = BlockingConn::new(&t.redis()).expect("blocking connection");
    let now = 1700000000.0;
    let ran = bc
        .run(async |conn| queue_core::cron::store::run_now(conn, "off", now).await)
        .expect("run now");
    assert!(ran);
    let missing = bc
        .run(async |conn| queue_core::cron::store::run_now(conn, "nope", now).await)
        .expect("run now");
    assert!(!missing);
    assert_eq!(llen(&mut c, &t.key("queue:cronq")), 1);
    assert!(!exists(&mut c, &t.key("cron_job:off:enqueued")));
    assert_eq!(
        hget(&mut c, &t.key("cron_job:off"), "last_enqueue_time").as_deref(),
        Some("2023-11-14 22:13:20 +0000")
    );
    assert_eq!(lrange(&mut c, &t.key("cron_job:off:jid_history")).len(), 1);
}

#[test]
fn a_tick_no_later_than_the_last_enqueue_is_not_pushed() {
    let t = TestRedis::start();
    let mut c = t.conn();
    store(&mut c, &t, "changed", "* * * * *", "enabled");
    // Enqueued at 22:13:20 under its old cron string; its tick now is 22:13:00.
    redis::cmd("HSET")
        .arg(t.key("cron_job:changed"))
        .arg("last_enqueue_time")
        .arg("2023-11-14 22:13:20 UTC")
        .exec(&mut c)
        .expect("HSET");
    let mut bc = BlockingConn::new(&t.redis()).expect("blocking connection");
    let mut tab = Crontab::new();
    assert_eq!(turn(&mut bc, &mut tab, 1700000000.5), 0);
    assert_eq!(turn(&mut bc, &mut tab, 1700000040.0), 1, "the next tick");
}

#[test]
fn a_bad_schedule_is_skipped_and_the_others_run() {
    let t = TestRedis::start();
    let mut c = t.conn();
    store(&mut c, &t, "bad", "61 * * * *", "enabled");
    store(&mut c, &t, "good", "* * * * *", "enabled");
    let mut bc = BlockingConn::new(&t.redis()).expect("blocking connection");
    let mut tab = Crontab::new();
    assert_eq!(turn(&mut bc, &mut tab, 1700000000.0), 1);
    assert_eq!(tab.len(), 1);
}

/// With 1,000 schedules and none due, a second of turns makes no per-schedule call: no `HMGET`, no
/// script, only the once-a-second change check.
#[test]
fn a_second_with_nothing_due_costs_no_per_schedule_command() {
    let t = TestRedis::start();
    let mut c = t.conn();
    for i in 0..1000 {
        store(&mut c, &t, &format!("yearly_{i}"), "0 0 1 1 *", "enabled");
    }
    let mut bc = BlockingConn::new(&t.redis()).expect("blocking connection");
    let mut tab = Crontab::new();
    let start = now_f64();
    assert_eq!(turn(&mut bc, &mut tab, start), 0);
    assert_eq!(tab.len(), 1000);
    let hmget = command_calls(&mut c, "hmget");
    let hget = command_calls(&mut c, "hget");
    let get = command_calls(&mut c, "get");
    let scard = command_calls(&mut c, "scard");
    // 40 turns a second, as the leader's polls run, for a bit over two seconds.
    let mut turns = 0;
    while now_f64() < start + 2.2 {
        turn(&mut bc, &mut tab, now_f64());
        turns += 1;
        thread::sleep(std::time::Duration::from_millis(25));
    }
    assert!(turns > 40, "{turns}");
    assert_eq!(command_calls(&mut c, "hmget"), hmget, "no schedule read");
    assert_eq!(command_calls(&mut c, "hget"), hget, "no schedule read");
    let checks = command_calls(&mut c, "scard") - scard;
    assert!((1..=3).contains(&checks), "change checks: {checks}");
    assert_eq!(command_calls(&mut c, "get") - get, checks);

    // A change through our counter is seen at the next check, within a second.
    redis::cmd("INCR")
        .arg(t.key("jq:cron:changes"))
        .exec(&mut c)
        .expect("INCR");
    let changed = std::time::Instant::now();
    wait_for("the change to refresh the index", || {
        bc.run(async |conn| tab.turn(conn, now_f64()).await)
            .expect("turn")
            .refreshed
    });
    assert!(changed.elapsed() < std::time::Duration::from_millis(1_500));
}
