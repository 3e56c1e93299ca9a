//! The `schedule`, `retry` and `dead` sorted sets as Sidekiq's `JobSet`s show them: size, pages latest
//! first, cursor scans, a bounded search, and the operator's actions — retry, add to queue, kill,
//! delete, clear, and retry or kill all.
//!
//! An action moves a job with `enqueue_due.lua` (the scheduler's script): the member leaves the set in
//! the same step that puts it on its queue (or in the dead set), and only if it was still there, so a
//! job two operators (or an operator and the scheduler) act on at once moves exactly once.

use serde_json::Value;

use super::queues::check_page;
use super::{as_float, FilterCall, Filtered};
use crate::clock::{float_string, now_f64};
use crate::error::{Error, Result};
use crate::job::Job;
use crate::keys::Keys;
use crate::link::connection::Conn;
use crate::{retry, scripts};

/// Members moved per script call by the bulk actions.
pub const BATCH: usize = 100;

/// One of Sidekiq's three job sets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobSet {
    Scheduled,
    Retry,
    Dead,
}

impl JobSet {
    /// By Sidekiq's key name: `schedule`, `retry` or `dead`.
    pub fn parse(name: &str) -> Result<JobSet> {
        match name {
            "schedule" => Ok(JobSet::Scheduled),
            "retry" => Ok(JobSet::Retry),
            "dead" => Ok(JobSet::Dead),
            other => Err(Error::InvalidArgument(format!(
                "unknown job set {other:?}; use schedule, retry or dead"
            ))),
        }
    }

    pub fn key(self, keys: &Keys) -> String {
        match self {
            JobSet::Scheduled => keys.schedule(),
            JobSet::Retry => keys.retry(),
            JobSet::Dead => keys.dead(),
        }
    }
}

/// What an action does with a job it takes out of its set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Back to its queue with one retry given back (`retry_count` - 1), as Sidekiq's `#retry`.
    Retry,
    /// Back to its queue unchanged but for `enqueued_at`, as Sidekiq's `#add_to_queue`.
    Enqueue,
    /// To the dead set, unchanged, scored now (trimmed as a failure trims it), as Sidekiq's `#kill`.
    Kill,
}

impl Action {
    pub fn parse(name: &str) -> Result<Action> {
        match name {
            "retry" => Ok(Action::Retry),
            "add_to_queue" | "enqueue" => Ok(Action::Enqueue),
            "kill" => Ok(Action::Kill),
            other => Err(Error::InvalidArgument(format!(
                "unknown action {other:?}; use retry, add_to_queue or kill"
            ))),
        }
    }
}

pub type Entry = (Vec<u8>, f64);

pub async fn size(conn: &mut Conn, set: JobSet) -> Result<i64> {
    let key = set.key(conn.keys());
    conn.cmd(redis::cmd("ZCARD").arg(key)).await
}

/// Up to `count` entries from rank `offset`, latest (highest score) first, one `ZRANGE … REV`.
pub async fn page(conn: &mut Conn, set: JobSet, offset: usize, count: usize) -> Result<Vec<Entry>> {
    check_page(count)?;
    if count == 0 {
        return Ok(Vec::new());
    }
    let key = set.key(conn.keys());
    let reply: Vec<redis::Value> = conn
        .cmd(
            redis::cmd("ZRANGE")
                .arg(key)
                .arg(offset)
                .arg(offset + count - 1)
                .arg("REV")
                .arg("WITHSCORES"),
        )
        .await?;
    Ok(pairs(reply))
}

/// One `ZSCAN` step: the next cursor (0 at the end) and the entries matching the glob `pattern`.
pub async fn scan(
    conn: &mut Conn,
    set: JobSet,
    pattern: &str,
    cursor: u64,
    count: usize,
) -> Result<(u64, Vec<Entry>)> {
    let key = set.key(conn.keys());
    let (next, reply): (u64, Vec<redis::Value>) = conn
        .cmd(
            redis::cmd("ZSCAN")
                .arg(key)
                .arg(cursor)
                .arg("MATCH")
                .arg(pattern)
                .arg("COUNT")
                .arg(count.clamp(1, 10_000)),
        )
        .await?;
    Ok((next, pairs(reply)))
}

/// The entries containing `needle` among at most `window` entries from rank `start` (latest first),
/// at most `limit` of them; one script call.
pub async fn filter(
    conn: &mut Conn,
    set: JobSet,
    needle: &str,
    start: usize,
    window: usize,
    limit: usize,
) -> Result<Filtered> {
    let key = set.key(conn.keys());
    let call = FilterCall {
        key,
        kind: "zset",
        needle,
        start,
        window,
        limit,
    };
    call.run(conn).await
}

/// Entries scored exactly `score`, those of job `jid` only when given (`ZRANGEBYSCORE`).
pub async fn fetch(
    conn: &mut Conn,
    set: JobSet,
    score: f64,
    jid: Option<&str>,
) -> Result<Vec<Entry>> {
    fetch_range(conn, set, score, score, jid).await
}

/// Entries scored from `min` to `max`, those of job `jid` only when given (`ZRANGEBYSCORE`, so it
/// costs the entries in the range).
pub async fn fetch_range(
    conn: &mut Conn,
    set: JobSet,
    min: f64,
    max: f64,
    jid: Option<&str>,
) -> Result<Vec<Entry>> {
    let key = set.key(conn.keys());
    let reply: Vec<redis::Value> = conn
        .cmd(
            redis::cmd("ZRANGEBYSCORE")
                .arg(key)
                .arg(float_string(min))
                .arg(float_string(max))
                .arg("WITHSCORES"),
        )
        .await?;
    let mut entries = pairs(reply);
    if let Some(jid) = jid {
        entries.retain(|(member, _)| jid_of(member).as_deref() == Some(jid));
    }
    Ok(entries)
}

/// Removes exactly this member (`ZREM`). Whether it was there.
pub async fn delete(conn: &mut Conn, set: JobSet, member: &[u8]) -> Result<bool> {
    let key = set.key(conn.keys());
    let removed: i64 = conn.cmd(redis::cmd("ZREM").arg(key).arg(member)).await?;
    Ok(removed > 0)
}

/// Removes job `jid` scored `score` (Sidekiq's `delete_by_jid`). Whether it was there.
pub async fn delete_by_jid(conn: &mut Conn, set: JobSet, score: f64, jid: &str) -> Result<bool> {
    for (member, _) in fetch(conn, set, score, Some(jid)).await? {
        if delete(conn, set, &member).await? {
            return Ok(true);
        }
    }
    Ok(false)
}

/// Acts on one job: the member as read (`member`), or if it is gone (rewritten meanwhile), the job
/// `jid` scored `score`. Returns whether a job moved.
pub async fn act(
    conn: &mut Conn,
    set: JobSet,
    action: Action,
    member: Option<&[u8]>,
    score: f64,
    jid: &str,
) -> Result<bool> {
    if let Some(member) = member {
        if act_on(conn, set, action, &[member.to_vec()]).await? > 0 {
            return Ok(true);
        }
    }
    let members: Vec<Vec<u8>> = fetch(conn, set, score, Some(jid))
        .await?
        .into_iter()
        .map(|(m, _)| m)
        .take(1)
        .collect();
    Ok(act_on(conn, set, action, &members).await? > 0)
}

/// Moves these members (those still in the set) in one script call. Returns how many moved. A
/// member that is not a job object cannot go to a queue: it is left where it is.
pub async fn act_on(
    conn: &mut Conn,
    set: JobSet,
    action: Action,
    members: &[Vec<u8>],
) -> Result<usize> {
    let keys = conn.keys().clone();
    let now = now_f64();
    let mut inv = scripts::ENQUEUE_DUE.prepare_invoke();
    inv.key(set.key(&keys))
        .key(keys.queues())
        .key(keys.dead())
        .arg(float_string(retry::dead_cutoff(now)))
        .arg(retry::DEAD_MAX_JOBS)
        .arg(float_string(now));
    let mut any = false;
    for member in members {
        let Some((job, queue)) = moved(member, action, now) else {
            continue;
        };
        let dest = if queue.is_empty() {
            keys.dead()
        } else {
            keys.queue(&queue)
        };
        inv.key(dest).arg(member.as_slice()).arg(job).arg(queue);
        any = true;
    }
    if !any {
        return Ok(0);
    }
    conn.script(&inv).await
}

/// Acts on every job in the set, `BATCH` per script call, latest first (Sidekiq's order, so the queue
/// ends up in the order Sidekiq's `retry_all` leaves it); stops after as many jobs as
/// the set held when it began (so jobs failing back in meanwhile are not chased). Returns how many
/// moved.
pub async fn act_on_all(conn: &mut Conn, set: JobSet, action: Action) -> Result<usize> {
    let key = set.key(conn.keys());
    let mut left = size(conn, set).await?.max(0) as usize;
    let mut moved = 0;
    let mut skip = 0;
    while left > 0 {
        let members: Vec<Vec<u8>> = conn
            .cmd(
                redis::cmd("ZRANGE")
                    .arg(&key)
                    .arg(skip)
                    .arg(skip + BATCH.min(left) - 1)
                    .arg("REV"),
            )
            .await?;
        if members.is_empty() {
            break;
        }
        let n = act_on(conn, set, action, &members).await?;
        // Members that could not move (not a job) stay in front: skip them next time.
        skip += members.len() - n;
        left = left.saturating_sub(members.len());
        moved += n;
    }
    Ok(moved)
}

/// Adds a job to the dead set now, trimmed as a failure trims it (Sidekiq's `DeadSet#kill(message)`).
pub async fn bury(conn: &mut Conn, job: &[u8]) -> Result<()> {
    let key = conn.keys().dead();
    let now = now_f64();
    let mut pipe = redis::pipe();
    pipe.atomic()
        .cmd("ZADD")
        .arg(&key)
        .arg(float_string(now))
        .arg(job)
        .ignore()
        .cmd("ZREMRANGEBYSCORE")
        .arg(&key)
        .arg("-inf")
        .arg(float_string(retry::dead_cutoff(now)))
        .ignore()
        .cmd("ZREMRANGEBYRANK")
        .arg(&key)
        .arg(0)
        .arg(-retry::DEAD_MAX_JOBS)
        .ignore();
    conn.pipe::<()>(&pipe).await
}

/// Adds a job to a set at `at` (Sidekiq's `JobSet#schedule`).
pub async fn add(conn: &mut Conn, set: JobSet, at: f64, job: &[u8]) -> Result<bool> {
    let key = set.key(conn.keys());
    let added: i64 = conn
        .cmd(redis::cmd("ZADD").arg(key).arg(float_string(at)).arg(job))
        .await?;
    Ok(added > 0)
}

/// Moves an existing member to score `at` (Sidekiq's `SortedEntry#reschedule`). Whether it was there.
pub async fn reschedule(conn: &mut Conn, set: JobSet, member: &[u8], at: f64) -> Result<bool> {
    let key = set.key(conn.keys());
    let changed: i64 = conn
        .cmd(
            redis::cmd("ZADD")
                .arg(key)
                .arg("XX")
                .arg("CH")
                .arg(float_string(at))
                .arg(member),
        )
        .await?;
    Ok(changed > 0)
}

/// Drops the whole set (`UNLINK`).
pub async fn clear(conn: &mut Conn, set: JobSet) -> Result<()> {
    let key = set.key(conn.keys());
    conn.cmd::<()>(redis::cmd("UNLINK").arg(key)).await
}

/// The job to write for `member` under `action`, and its queue (`""`: the dead set); `None` for a
/// member that cannot go where the action sends it.
fn moved(member: &[u8], action: Action, now: f64) -> Option<(Vec<u8>, String)> {
    if action == Action::Kill {
        return Some((member.to_vec(), String::new()));
    }
    let mut job = Job::parse(member).ok()?;
    let queue = job
        .queue()
        .filter(|q| !q.is_empty())
        .unwrap_or("default")
        .to_owned();
    if action == Action::Retry {
        if let Some(count) = job.retry_count() {
            job.set("retry_count", Value::from(count - 1));
        }
    }
    let form = job.time_form();
    if job.get("created_at").is_none() {
        job.set_time("created_at", now, form);
    }
    job.set_time("enqueued_at", now, form);
    Some((job.to_json().into_bytes(), queue))
}

fn jid_of(member: &[u8]) -> Option<String> {
    Job::parse(member).ok()?.jid().map(str::to_owned)
}

/// `[member, score, member, score, …]` as pairs.
fn pairs(reply: Vec<redis::Value>) -> Vec<Entry> {
    let mut out = Vec::with_capacity(reply.len() / 2);
    let mut items = reply.into_iter();
    while let (Some(member), Some(score)) = (items.next(), items.next()) {
        if let redis::Value::BulkString(b) = member {
            out.push((b, as_float(&score)));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(b: &[u8]) -> String {
        String::from_utf8(b.to_vec()).unwrap()
    }

    #[test]
    fn retry_gives_one_retry_back_and_keeps_the_rest() {
        let (job, queue) = moved(
            br#"{"class":"W","args":[123456789012345678901234567890,0.1],"queue":"low","retry_count":2,"created_at":1.5}"#,
            Action::Retry,
            10.5,
        )
        .unwrap();
        assert_eq!(queue, "low");
        assert_eq!(
            text(&job),
            r#"{"class":"W","args":[123456789012345678901234567890,0.1],"queue":"low","retry_count":1,"created_at":1.5,"enqueued_at":10.5}"#
        );
    }

    #[test]
    fn a_sidekiq_8_entry_is_queued_with_millisecond_enqueued_at() {
        let (job, _) = moved(
            br#"{"class":"W","queue":"q","retry_count":0,"created_at":1763985600123,"failed_at":1763985601000}"#,
            Action::Enqueue,
            1763985700.5,
        )
        .unwrap();
        assert!(
            text(&job).ends_with(r#""enqueued_at":1763985700500}"#),
            "{}",
            text(&job)
        );
    }

    #[test]
    fn add_to_queue_keeps_retry_count_and_kill_keeps_the_bytes() {
        let member = br#"{"class":"W","queue":"q","retry_count":2,"created_at":1.0}"#;
        let (job, _) = moved(member, Action::Enqueue, 3.0).unwrap();
        assert!(text(&job).contains(r#""retry_count":2"#));
        assert_eq!(
            moved(member, Action::Kill, 3.0).unwrap(),
            (member.to_vec(), String::new())
        );
        assert_eq!(moved(b"{oops", Action::Retry, 3.0), None);
    }

    #[test]
    fn names_are_checked() {
        assert_eq!(JobSet::parse("retry").unwrap(), JobSet::Retry);
        assert!(JobSet::parse("queue").is_err());
        assert_eq!(Action::parse("add_to_queue").unwrap(), Action::Enqueue);
        assert!(Action::parse("nuke").is_err());
    }
}
