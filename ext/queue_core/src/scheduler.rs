//! The scheduler: moves due jobs from `schedule` and `retry` onto their queues.
//!
//! One process at a time does it: the holder of a short lease (`jq:scheduler:leader`, renewed on every
//! poll). The leader polls every [`POLL`] with one script that renews the lease and counts due jobs
//! (`due.lua`), so a job runs within a second of its time and an idle leader costs Redis two calls a
//! second; the others only
//! try to take the lease every [`STANDBY`], so a hundred processes do not stampede Redis, and a dead
//! leader is replaced within `LEASE + STANDBY`.
//!
//! A move is two round trips: read the due members, then `enqueue_due.lua` removes each one from the
//! sorted set and pushes it in the same atomic step, with `enqueued_at` set to now as Sidekiq's client
//! does. A member that is not a job (bad JSON, no queue) goes to the dead set with its error instead
//! of being dropped. Nothing can be lost between the two steps: until the script runs, the job is
//! still in its sorted set.

use std::time::Duration;

use serde_json::Value;

use crate::clock::{float_string, now_f64};
use crate::connection::Conn;
use crate::error::Result;
use crate::job::Job;
use crate::retry;
use crate::scripts;

pub const POLL: Duration = Duration::from_millis(500);
pub const STANDBY: Duration = Duration::from_secs(2);
pub const LEASE: Duration = Duration::from_secs(5);
/// Jobs moved per script call.
const BATCH: usize = 100;

/// Takes or renews the scheduler lease. True if this process is the leader.
pub async fn lead(conn: &mut Conn, identity: &str) -> Result<bool> {
    Ok(poll(conn, identity).await?.is_some())
}

/// One poll: takes or renews the lease; `None` if another process leads, else how many jobs are due.
pub async fn poll(conn: &mut Conn, identity: &str) -> Result<Option<i64>> {
    let keys = conn.keys().clone();
    let mut inv = scripts::DUE.prepare_invoke();
    inv.key(keys.scheduler_lock())
        .key(keys.schedule())
        .key(keys.retry())
        .arg(identity)
        .arg(LEASE.as_millis() as u64)
        .arg(float_string(now_f64()));
    let due: i64 = conn.script(&inv).await?;
    Ok((due >= 0).then_some(due))
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
                job.set_float("enqueued_at", now);
                (job.to_json().into_bytes(), queue)
            }
            None => {
                job.set("error_class", Value::String("JobQueue::InvalidJob".into()));
                job.set(
                    "error_message",
                    Value::String("scheduled job has no queue".into()),
                );
                job.set_float("failed_at", now);
                (job.to_json().into_bytes(), String::new())
            }
        },
        Err(_) => (member.to_vec(), String::new()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn unusable_members_go_to_the_dead_set() {
        assert_eq!(ready(b"{oops", 1.0), (b"{oops".to_vec(), String::new()));
        let (job, q) = ready(br#"{"class":"W"}"#, 1.0);
        assert!(q.is_empty());
        assert!(String::from_utf8(job).unwrap().contains("has no queue"));
    }
}
