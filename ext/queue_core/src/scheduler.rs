//! The scheduler: moves due jobs from `schedule` and `retry` onto their queues.
//!
//! One process at a time does it: the holder of a short lease (`jq:scheduler:leader`, renewed on every
//! poll). Each poll is one script call (`due.lua`) that renews the lease, counts the due jobs and
//! finds the earliest job not yet due; the leader then sleeps until that job's time, but never longer
//! than [`POLL`], because a job may be scheduled sooner than any it knows of ([`pause_after`]). So a job
//! scheduled ahead starts within a few milliseconds of its time (measured: p99 under 10 ms, where
//! polling every 500 ms gave ~490 ms), one written already due within `POLL`, and an idle leader
//! costs Redis at most `1 s / POLL` (40) calls a second (measured: 38). The other processes only try
//! to take the lease every [`STANDBY`], so a hundred processes do not stampede Redis, and a dead leader
//! is replaced within `LEASE + STANDBY`.
//!
//! Times are compared as today: scores are the clients' epoch seconds, checked against this host's
//! clock.
//!
//! A move is two round trips: read the due members, then `enqueue_due.lua` removes each one from the
//! sorted set and pushes it in the same atomic step, with `enqueued_at` set to now as Sidekiq's client
//! does. A member that is not a job (bad JSON, no queue) goes to the dead set with its error instead
//! of being dropped. Nothing can be lost between the two steps: until the script runs, the job is
//! still in its sorted set.

use std::time::Duration;

use serde_json::Value;

use crate::clock::{float_string, now_f64};
use crate::cron::Crontab;
use crate::error::{Error, Result};
use crate::job::Job;
use crate::link::connection::Conn;
use crate::retry;
use crate::scripts;

/// The leader's longest sleep between polls: how late a job scheduled less than this ahead can be.
pub const POLL: Duration = Duration::from_millis(25);
/// How often a process that does not lead tries to take the lease.
pub const STANDBY: Duration = Duration::from_secs(2);
pub const LEASE: Duration = Duration::from_secs(5);
/// The leader's wait after a move failed: the old polling cadence, so a lasting error (a queue key
/// that is not a list) is logged twice a second, not forty times.
pub const AFTER_ERROR: Duration = Duration::from_millis(500);
// An idle leader makes one call per POLL: at most 50 a second.
const _: () = assert!(POLL.as_millis() >= 20);
// Whatever it waits, the leader polls again, renewing its lease, before the lease runs out.
const _: () = assert!(
    POLL.as_millis() < LEASE.as_millis()
        && STANDBY.as_millis() < LEASE.as_millis()
        && AFTER_ERROR.as_millis() < LEASE.as_millis()
);
/// Jobs moved per script call.
const BATCH: usize = 100;

/// What a leader's poll found.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Due {
    /// Jobs due now in `schedule` and `retry` together.
    pub count: i64,
    /// The earliest score (epoch seconds) in either set that was not due yet, if any.
    pub next_at: Option<f64>,
}

/// One turn of a process's scheduler: poll, move what is due if this process leads, and return how
/// long to wait before the next turn ([`pause_after`]; [`STANDBY`] if Redis cannot be reached,
/// [`AFTER_ERROR`] if the move failed). Errors are logged, not returned: the loop goes on.
pub async fn turn(conn: &mut Conn, identity: &str) -> Duration {
    turn_with_cron(conn, identity, None).await
}

/// [`turn`], and, when this process leads and `crontab` is given, the cron turn
/// ([`Crontab::turn`]: the ticks due pushed, the index of schedules kept). A process that does not
/// lead forgets its index, so a leader always starts from what Redis holds.
pub async fn turn_with_cron(
    conn: &mut Conn,
    identity: &str,
    crontab: Option<&mut Crontab>,
) -> Duration {
    let due = match poll(conn, identity).await {
        Ok(due) => due,
        Err(e) => {
            tracing::warn!(error = %e, "scheduler cannot reach Redis");
            return STANDBY;
        }
    };
    if let Some(tab) = crontab {
        if due.is_some() {
            if let Err(e) = tab.turn(conn, now_f64()).await {
                // Retried after AFTER_ERROR, so a lasting error is not logged 40 times a second.
                tracing::warn!(error = %e, "cron turn failed");
                return AFTER_ERROR;
            }
        } else {
            tab.forget();
        }
    }
    if due.is_some_and(|d| d.count > 0) {
        match enqueue_due(conn).await {
            Ok(moved) => tracing::debug!(moved, "scheduler moved due jobs to their queues"),
            Err(e) => {
                tracing::warn!(error = %e, "scheduler failed to enqueue due jobs");
                return AFTER_ERROR;
            }
        }
    }
    pause_after(due.as_ref(), now_f64())
}

/// Takes or renews the scheduler lease. True if this process is the leader.
pub async fn lead(conn: &mut Conn, identity: &str) -> Result<bool> {
    Ok(poll(conn, identity).await?.is_some())
}

/// One poll: takes or renews the lease; `None` if another process leads, else what is due and when
/// the next job will be.
pub async fn poll(conn: &mut Conn, identity: &str) -> Result<Option<Due>> {
    let keys = conn.keys().clone();
    let mut inv = scripts::DUE.prepare_invoke();
    inv.key(keys.scheduler_lock())
        .key(keys.schedule())
        .key(keys.retry())
        .arg(identity)
        .arg(LEASE.as_millis() as u64)
        .arg(float_string(now_f64()));
    let reply: Option<(i64, Option<String>)> = conn.script(&inv).await?;
    let Some((count, next_at)) = reply else {
        return Ok(None);
    };
    let next_at = next_at.map(|s| parse_score(&s)).transpose()?;
    Ok(Some(Due { count, next_at }))
}

fn parse_score(s: &str) -> Result<f64> {
    s.parse()
        .map_err(|_| Error::redis(format!("due.lua returned {s:?} as a score")))
}

/// How long to wait after a poll that found `due` (`None`: another process leads) when it is `now`
/// (epoch seconds): a standby waits [`STANDBY`]; the leader waits until the next job is due, but at
/// most [`POLL`].
pub fn pause_after(due: Option<&Due>, now: f64) -> Duration {
    let Some(due) = due else {
        return STANDBY;
    };
    match due.next_at {
        // Clamped at zero: if the time has come since the poll, poll again at once.
        Some(at) if at - now < POLL.as_secs_f64() => Duration::from_secs_f64((at - now).max(0.0)),
        // Nothing scheduled, or later than POLL (a score of +inf included).
        _ => POLL,
    }
}

pub async fn resign(conn: &mut Conn, identity: &str) -> Result<()> {
    let mut inv = scripts::RELEASE.prepare_invoke();
    inv.key(conn.keys().scheduler_lock()).arg(identity);
    conn.script::<i64>(&inv).await?;
    Ok(())
}

/// Moves every due job of both sets. Returns how many moved.
pub async fn enqueue_due(conn: &mut Conn) -> Result<usize> {
    let keys = conn.keys().clone();
    let mut moved = 0;
    for set in [keys.schedule(), keys.retry()] {
        moved += enqueue_due_from(conn, &set).await?;
    }
    Ok(moved)
}

async fn enqueue_due_from(conn: &mut Conn, set: &str) -> Result<usize> {
    let keys = conn.keys().clone();
    let mut moved = 0;
    loop {
        let now = now_f64();
        let due: Vec<Vec<u8>> = conn
            .cmd(
                redis::cmd("ZRANGEBYSCORE")
                    .arg(set)
                    .arg("-inf")
                    .arg(float_string(now))
                    .arg("LIMIT")
                    .arg(0)
                    .arg(BATCH),
            )
            .await?;
        if due.is_empty() {
            return Ok(moved);
        }
        let mut inv = scripts::ENQUEUE_DUE.prepare_invoke();
        inv.key(set)
            .key(keys.queues())
            .key(keys.dead())
            .arg(float_string(retry::dead_cutoff(now)))
            .arg(retry::DEAD_MAX_JOBS)
            .arg(float_string(now));
        for member in &due {
            let (job, queue) = ready(member, now);
            let dest = if queue.is_empty() {
                keys.dead()
            } else {
                keys.queue(&queue)
            };
            inv.key(dest).arg(member).arg(job).arg(queue);
        }
        let n: usize = conn.script(&inv).await?;
        moved += n;
        if due.len() < BATCH {
            return Ok(moved);
        }
    }
}

/// The job to push for a due member, and its queue; an empty queue means "to the dead set".
fn ready(member: &[u8], now: f64) -> (Vec<u8>, String) {
    match Job::parse(member) {
        Ok(mut job) => match job.queue().filter(|q| !q.is_empty()).map(str::to_owned) {
            Some(queue) => {
                job.stamp("enqueued_at", now);
                (job.to_json().into_bytes(), queue)
            }
            None => {
                job.set("error_class", Value::String("JobQueue::InvalidJob".into()));
                job.set(
                    "error_message",
                    Value::String("scheduled job has no queue".into()),
                );
                job.stamp("failed_at", now);
                (job.to_json().into_bytes(), String::new())
            }
        },
        Err(_) => (member.to_vec(), String::new()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn led(next_at: Option<f64>) -> Due {
        Due { count: 0, next_at }
    }

    #[test]
    fn a_standby_waits_standby() {
        assert_eq!(pause_after(None, 100.0), STANDBY);
    }

    #[test]
    fn an_idle_leader_waits_poll() {
        assert_eq!(pause_after(Some(&led(None)), 100.0), POLL);
        assert_eq!(pause_after(Some(&led(Some(160.0))), 100.0), POLL);
        assert_eq!(pause_after(Some(&led(Some(f64::INFINITY))), 100.0), POLL);
    }

    #[test]
    fn the_leader_wakes_when_the_next_job_is_due() {
        let pause = pause_after(Some(&led(Some(100.010))), 100.0);
        assert!(
            pause > Duration::from_micros(9_990) && pause < Duration::from_micros(10_010),
            "{pause:?}"
        );
        assert_eq!(
            pause_after(Some(&led(Some(100.0 + POLL.as_secs_f64()))), 100.0),
            POLL
        );
    }

    #[test]
    fn a_job_due_since_the_poll_is_moved_at_once() {
        assert_eq!(pause_after(Some(&led(Some(99.5))), 100.0), Duration::ZERO);
        assert_eq!(pause_after(Some(&led(Some(100.0))), 100.0), Duration::ZERO);
    }

    #[test]
    fn due_job_gets_enqueued_at_and_keeps_the_rest() {
        let (job, q) = ready(br#"{"class":"W","args":[1.5],"queue":"low","x":1}"#, 12.5);
        assert_eq!(q, "low");
        assert_eq!(
            String::from_utf8(job).unwrap(),
            r#"{"class":"W","args":[1.5],"queue":"low","x":1,"enqueued_at":12.5}"#
        );
    }

    #[test]
    fn a_sidekiq_8_job_gets_enqueued_at_in_milliseconds() {
        let (job, _) = ready(
            br#"{"class":"W","queue":"low","created_at":1763985600123}"#,
            1763985700.25,
        );
        assert_eq!(
            String::from_utf8(job).unwrap(),
            r#"{"class":"W","queue":"low","created_at":1763985600123,"enqueued_at":1763985700250}"#
        );
    }

    #[test]
    fn unusable_members_go_to_the_dead_set() {
        assert_eq!(ready(b"{oops", 1.0), (b"{oops".to_vec(), String::new()));
        let (job, q) = ready(br#"{"class":"W"}"#, 1.0);
        assert!(q.is_empty());
        assert!(String::from_utf8(job).unwrap().contains("has no queue"));
    }
}
