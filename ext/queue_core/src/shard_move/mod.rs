//! Moving a queue between shards: [`move_queue`] takes a queue's queued, scheduled and retrying jobs
//! and its deduplication keys from one Redis (the shard the queue leaves) to another, while servers
//! run and clients push on both.
//!
//! Two Redis servers share no transaction, so each batch goes in three steps, each atomic on its own
//! server, with a token that makes the middle one happen once:
//!
//! 1. on the old shard, a script takes the batch out of the queue's list (or the sorted set) into a
//!    holding key (`jq:moving:<queue>:<kind>`, [`Keys::moving`]) and records a new token beside it.
//!    From then on no server of the old shard can fetch or enqueue those jobs; a job a server took
//!    before the script is not in the batch.
//! 2. on the new shard, a script writes the batch unless the token's marker (`jq:moved:<token>`, a
//!    day's TTL) is there, and sets the marker in the same step.
//! 3. on the old shard, the holding key and its token are deleted.
//!
//! A move that stops anywhere (a crash, a lost connection) leaves at most one batch held per kind;
//! the next move of the same queue finds it first and finishes it, and step 2's marker keeps it from
//! being written twice. So no job is lost or doubled, whatever stops when.
//!
//! Order: the scheduled and retrying jobs first, then the list until it is empty, so jobs the old
//! shard's scheduler enqueues meanwhile are in the list by then; the deduplication keys last (each
//! `DUMP`ed and `RESTORE`d with its remaining TTL, then deleted; one the new shard holds already
//! stands). What the old shard receives after the move's last batch stays there (see README,
//! "Shards": the clients are switched first).
//!
//! [`Keys::moving`]: crate::keys::Keys::moving

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use redis::Value as RedisValue;

use crate::client::check_queue_name;
use crate::error::Result;
use crate::job::Job;
use crate::link::connection::Conn;
use crate::migrate::{Migrated, Rename};
use crate::scripts;

/// Jobs (or keys) per batch.
const BATCH: usize = 100;
/// Entries a `ZSCAN`/`SCAN` call looks at.
const SCAN_COUNT: usize = 1000;
/// Restores one key on the new shard unless it holds that name already.
const RESTORE: &str = include_str!("../scripts/shard_restore.lua");

static NEXT_TOKEN: AtomicU64 = AtomicU64::new(0);

/// A token no other batch has: this process, the time, a counter.
fn new_token() -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    let n = NEXT_TOKEN.fetch_add(1, Ordering::Relaxed);
    format!("{:x}-{nanos:x}-{n:x}", std::process::id())
}

/// Moves queue `queue` from the Redis `from` talks to onto the one `to` talks to (see the module
/// documentation). Both connections must use the same namespace.
pub async fn move_queue(from: &mut Conn, to: &mut Conn, queue: &str) -> Result<Migrated> {
    check_queue_name(queue)?;
    let keys = from.keys().clone();
    let scheduled = move_set(from, to, queue, &keys.schedule(), "schedule").await?;
    let retry = move_set(from, to, queue, &keys.retry(), "retry").await?;
    let queued = move_list(from, to, queue).await?;
    let moved_keys = move_keys(from, to, queue).await?;
    Ok(Migrated {
        queued,
        scheduled,
        retry,
        keys: moved_keys,
    })
}

/// Steps 2 and 3 of a batch: write it on the new shard (once), release it on the old one.
async fn put(
    from: &mut Conn,
    to: &mut Conn,
    queue: &str,
    kind: &str,
    token: &str,
    target: &str,
    items: &[Vec<u8>],
) -> Result<u64> {
    let keys = from.keys().clone();
    let mut inv = scripts::SHARD_PUT.prepare_invoke();
    inv.key(to.keys().moved(token))
        .key(target)
        .key(to.keys().queues())
        .arg(if kind == "queue" { "list" } else { "zset" })
        .arg(queue);
    for item in items {
        inv.arg(item);
    }
    let written: u64 = to.script(&inv).await?;
    let mut release = redis::pipe();
    release
        .del(keys.moving(queue, kind))
        .ignore()
        .del(keys.moving_token(queue, kind))
        .ignore();
    from.pipe::<()>(&release).await?;
    Ok(written)
}

async fn move_list(from: &mut Conn, to: &mut Conn, queue: &str) -> Result<u64> {
    let keys = from.keys().clone();
    let target = to.keys().queue(queue);
    let mut moved = 0;
    loop {
        let mut inv = scripts::SHARD_TAKE_LIST.prepare_invoke();
        inv.key(keys.queue(queue))
            .key(keys.moving(queue, "queue"))
            .key(keys.moving_token(queue, "queue"))
            .key(keys.queues())
            .arg(BATCH)
            .arg(new_token())
            .arg(queue);
        let (token, jobs): (String, Vec<Vec<u8>>) = from.script(&inv).await?;
        if jobs.is_empty() {
            return Ok(moved);
        }
        moved += put(from, to, queue, "queue", &token, &target, &jobs).await?;
    }
}

/// Whether a job of `schedule` or `retry` belongs to `queue` (runs there, or retries there).
fn belongs(raw: &[u8], queue: &str) -> bool {
    Job::parse(raw)
        .map(|job| job.str("queue") == Some(queue) || job.str("retry_queue") == Some(queue))
        .unwrap_or(false)
}

async fn move_set(
    from: &mut Conn,
    to: &mut Conn,
    queue: &str,
    set: &str,
    kind: &str,
) -> Result<u64> {
    let target = if kind == "retry" {
        to.keys().retry()
    } else {
        to.keys().schedule()
    };
    // A batch a stopped move left held goes first.
    let mut moved = take_set(from, to, queue, set, kind, &target, &[]).await?;
    let mut cursor = "0".to_owned();
    loop {
        let (next, entries) = from.zscan(set, &cursor, SCAN_COUNT).await?;
        // Members and scores alternate; the script reads each score itself, atomically.
        let ours: Vec<&Vec<u8>> = entries
            .iter()
            .step_by(2)
            .filter(|raw| belongs(raw, queue))
            .collect();
        for chunk in ours.chunks(BATCH) {
            moved += take_set(from, to, queue, set, kind, &target, chunk).await?;
        }
        if next == "0" {
            return Ok(moved);
        }
        cursor = next;
    }
}

/// One batch of a sorted set (or, with no jobs, a batch a stopped move left held), all three steps.
async fn take_set(
    from: &mut Conn,
    to: &mut Conn,
    queue: &str,
    set: &str,
    kind: &str,
    target: &str,
    jobs: &[&Vec<u8>],
) -> Result<u64> {
    let keys = from.keys().clone();
    let mut inv = scripts::SHARD_TAKE_SET.prepare_invoke();
    inv.key(set)
        .key(keys.moving(queue, kind))
        .key(keys.moving_token(queue, kind))
        .arg(new_token());
    for job in jobs {
        inv.arg(*job);
    }
    let (token, taken): (String, Vec<Vec<u8>>) = from.script(&inv).await?;
    if taken.is_empty() {
        return Ok(0);
    }
    put(from, to, queue, kind, &token, target, &taken).await
}

async fn move_keys(from: &mut Conn, to: &mut Conn, queue: &str) -> Result<u64> {
    let namespace = from.keys().namespace().to_owned();
    // A rename onto itself matches exactly the queue's keys (and keeps their names).
    let rename = Rename::new(&namespace, queue, queue);
    let pattern = format!(
        "{}*",
        crate::keys::glob_escape(&format!("{namespace}duplicate:{queue}:"))
    );
    let mut moved = 0;
    let mut cursor = "0".to_owned();
    loop {
        let (next, found): (String, Vec<RedisValue>) =
            from.scan(&cursor, &pattern, SCAN_COUNT).await?;
        let names: Vec<String> = found
            .iter()
            .filter_map(|v| match v {
                RedisValue::BulkString(b) => String::from_utf8(b.clone()).ok(),
                _ => None,
            })
            .filter(|name| rename.key(name).is_some())
            .collect();
        for chunk in names.chunks(BATCH) {
            moved += move_key_batch(from, to, chunk).await?;
        }
        if next == "0" {
            return Ok(moved);
        }
        cursor = next;
    }
}

/// `DUMP` and `PTTL` each key, `RESTORE` it on the new shard with what is left of its TTL (unless
/// the new shard has one of that name already, or it expired meanwhile), then delete it here.
async fn move_key_batch(from: &mut Conn, to: &mut Conn, names: &[String]) -> Result<u64> {
    let mut read = redis::pipe();
    for name in names {
        read.cmd("DUMP").arg(name).cmd("PTTL").arg(name);
    }
    let values: Vec<RedisValue> = from.pipe(&read).await?;
    let mut write = redis::pipe();
    let mut count = 0;
    for (name, pair) in names.iter().zip(values.chunks(2)) {
        let (RedisValue::BulkString(payload), RedisValue::Int(ttl)) = (&pair[0], &pair[1]) else {
            continue; // gone meanwhile
        };
        if *ttl == -2 {
            continue;
        }
        write
            .cmd("EVAL")
            .arg(RESTORE)
            .arg(1)
            .arg(name)
            .arg((*ttl).max(0))
            .arg(payload.as_slice())
            .ignore();
        count += 1;
    }
    if count > 0 {
        to.pipe::<()>(&write).await?;
    }
    let mut delete = redis::cmd("DEL");
    for name in names {
        delete.arg(name);
    }
    from.cmd::<()>(&delete).await?;
    Ok(count)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_differ() {
        assert_ne!(new_token(), new_token());
    }

    #[test]
    fn a_set_job_belongs_to_the_queue_it_runs_or_retries_on() {
        assert!(belongs(br#"{"queue":"a"}"#, "a"));
        assert!(belongs(br#"{"queue":"x","retry_queue":"a"}"#, "a"));
        assert!(!belongs(br#"{"queue":"ab"}"#, "a"));
        assert!(!belongs(b"not json", "a"));
    }
}
