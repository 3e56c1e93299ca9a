//! Renaming a queue: [`migrate_queue`] moves the queued, scheduled and retrying jobs of one queue to
//! another, with their deduplication keys, while servers run and clients push.
//!
//! Every job moves in its own atomic step (a Lua script that removes the job as stored and writes its
//! rewritten JSON in the same call), so a job is never lost or duplicated: one a server fetched, or the
//! scheduler enqueued, between our read and the script is simply not there to move. The rewrite is
//! done here, in Rust, with `serde_json`'s `preserve_order` and `arbitrary_precision` ([`Job`]):
//! only `queue`, `retry_queue` (if it names the old queue) and `idempotency_key` (if it is the old
//! queue's key) change; unknown fields and every number survive byte for byte. Lua's cjson would
//! re-encode numbers lossily, so it never touches the JSON.
//!
//! - **Queued** jobs are taken from the old list's right end (oldest first) and pushed on the left of
//!   the new one, as a client pushes: they keep their order and run after what the new queue already
//!   holds. When the old list is empty its name leaves `queues`.
//! - **Scheduled and retrying** jobs stay in their set with their score; only their JSON changes.
//! - **Deduplication keys** `<ns>duplicate:<from>:<sha256>` (and any `:<suffix>` after the hash)
//!   become `<ns>duplicate:<to>:<sha256>`, keeping their TTL.
//!
//! Not moved: jobs a server holds (they finish under the old name, and a crashed server's jobs are
//! recovered to the old queue), dead jobs, and jobs pushed to the old name after the call. Running it
//! again is safe and moves only what is left.

use redis::Value as RedisValue;
use serde_json::Value;

use crate::client::check_queue_name;
use crate::error::{Error, Result};
use crate::job::Job;
use crate::link::connection::Conn;
use crate::scripts;

/// Jobs (or keys) per script call, and per read.
const BATCH: usize = 100;
/// Entries a `SCAN`/`ZSCAN` call looks at.
const SCAN_COUNT: usize = 1000;
/// Length of a SHA-256 in hex: the hash part of a deduplication key.
const HASH_LEN: usize = 64;

/// What one migration moved.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Migrated {
    /// Jobs moved from the old queue's list to the new one's.
    pub queued: u64,
    /// Jobs in `schedule` rewritten to the new queue.
    pub scheduled: u64,
    /// Jobs in `retry` rewritten to the new queue.
    pub retry: u64,
    /// Deduplication keys renamed.
    pub keys: u64,
}

/// Moves everything of queue `from` to queue `to` (see the module documentation).
pub async fn migrate_queue(conn: &mut Conn, from: &str, to: &str) -> Result<Migrated> {
    check_queue_name(from)?;
    check_queue_name(to)?;
    if from == to {
        return Err(Error::InvalidArgument(format!(
            "cannot migrate queue {from:?} to itself"
        )));
    }
    let rename = Rename::new(conn.keys().namespace(), from, to);
    let keys = conn.keys().clone();
    Ok(Migrated {
        queued: migrate_list(conn, &rename).await?,
        scheduled: migrate_set(conn, &keys.schedule(), &rename).await?,
        retry: migrate_set(conn, &keys.retry(), &rename).await?,
        keys: migrate_keys(conn, &rename).await?,
    })
}

/// The old and new queue names, and what they make of a job and a deduplication key.
#[derive(Debug, Clone)]
pub struct Rename {
    from: String,
    to: String,
    /// `<ns>duplicate:<from>:`
    old_prefix: String,
    /// `<ns>duplicate:<to>:`
    new_prefix: String,
}

impl Rename {
    pub fn new(namespace: &str, from: &str, to: &str) -> Rename {
        Rename {
            from: from.to_owned(),
            to: to.to_owned(),
            old_prefix: format!("{namespace}duplicate:{from}:"),
            new_prefix: format!("{namespace}duplicate:{to}:"),
        }
    }

    /// The JSON of a job that was in the old queue's list, now in the new queue; `None` when it is not
    /// a JSON object (it moves as it is: it belongs to the queue whose list holds it).
    pub fn queued_job(&self, raw: &[u8]) -> Option<Vec<u8>> {
        let mut job = Job::parse(raw).ok()?;
        self.rewrite(&mut job, true);
        Some(job.to_json().into_bytes())
    }

    /// The JSON of a job of `schedule` or `retry`, if it belongs to the old queue (its `queue` or its
    /// `retry_queue` names it); `None` otherwise, and for a member that is not a job.
    pub fn set_job(&self, raw: &[u8]) -> Option<Vec<u8>> {
        let mut job = Job::parse(raw).ok()?;
        let ours = |field: &str| job.str(field) == Some(self.from.as_str());
        if !ours("queue") && !ours("retry_queue") {
            return None;
        }
        self.rewrite(&mut job, false);
        Some(job.to_json().into_bytes())
    }

    /// Sets `queue` to the new name (always for a job of the old list, whose list decides where it
    /// runs; for a set's job only if it named the old queue), and `retry_queue` and `idempotency_key`
    /// when they name the old queue.
    fn rewrite(&self, job: &mut Job, in_old_list: bool) {
        let to = || Value::String(self.to.clone());
        if in_old_list || job.queue() == Some(self.from.as_str()) {
            job.set("queue", to());
        }
        if job.str("retry_queue") == Some(self.from.as_str()) {
            job.set("retry_queue", to());
        }
        if let Some(key) = job.str("idempotency_key").and_then(|k| self.field_key(k)) {
            job.set("idempotency_key", Value::String(key));
        }
    }

    /// A job's `idempotency_key` field, renamed: the key as stored (with the namespace), or as a
    /// client that leaves the namespace to its Redis connection writes it (without).
    fn field_key(&self, old: &str) -> Option<String> {
        self.key(old).or_else(|| {
            let bare = Rename::new("", &self.from, &self.to);
            bare.key(old)
        })
    }

    /// The new name of deduplication key `old`, if it is one of the old queue's: `<ns>duplicate:<from>:`
    /// followed by a 64-hex hash and nothing or `:<suffix>`. The hash check keeps queue `a` from
    /// taking the keys of queue `a:b`.
    pub fn key(&self, old: &str) -> Option<String> {
        let rest = old.strip_prefix(&self.old_prefix)?;
        let (hash, suffix) = rest.split_at_checked(HASH_LEN)?;
        let is_hash = hash.bytes().all(|b| b.is_ascii_hexdigit());
        (is_hash && (suffix.is_empty() || suffix.starts_with(':')))
            .then(|| format!("{}{rest}", self.new_prefix))
    }

    /// A `SCAN MATCH` pattern for the old queue's keys (glob characters in the names escaped).
    fn key_pattern(&self) -> String {
        format!("{}*", crate::keys::glob_escape(&self.old_prefix))
    }
}

async fn migrate_list(conn: &mut Conn, rename: &Rename) -> Result<u64> {
    let keys = conn.keys().clone();
    let (old, new) = (keys.queue(&rename.from), keys.queue(&rename.to));
    let mut moved = 0;
    loop {
        // The oldest jobs are at the right end: LRANGE lists them last.
        let batch: Vec<Vec<u8>> = conn
            .cmd(redis::cmd("LRANGE").arg(&old).arg(-(BATCH as i64)).arg(-1))
            .await?;
        if batch.is_empty() {
            return Ok(moved);
        }
        let mut inv = scripts::MIGRATE_LIST.prepare_invoke();
        inv.key(&old)
            .key(&new)
            .key(keys.queues())
            .arg(&rename.from)
            .arg(&rename.to);
        for raw in batch.iter().rev() {
            let job = rename.queued_job(raw).unwrap_or_else(|| raw.clone());
            inv.arg(raw).arg(job);
        }
        let n: u64 = conn.script(&inv).await?;
        moved += n;
    }
}

async fn migrate_set(conn: &mut Conn, set: &str, rename: &Rename) -> Result<u64> {
    let mut moved = 0;
    let mut cursor = "0".to_owned();
    loop {
        let (next, entries) = conn.zscan(set, &cursor, SCAN_COUNT).await?;
        // Members and scores alternate; the script reads each score itself, atomically.
        let pairs: Vec<(&Vec<u8>, Vec<u8>)> = entries
            .iter()
            .step_by(2)
            .filter_map(|raw| rename.set_job(raw).map(|job| (raw, job)))
            .collect();
        for chunk in pairs.chunks(BATCH) {
            let mut inv = scripts::MIGRATE_SET.prepare_invoke();
            inv.key(set);
            for (raw, job) in chunk {
                inv.arg(*raw).arg(job);
            }
            let n: u64 = conn.script(&inv).await?;
            moved += n;
        }
        if next == "0" {
            return Ok(moved);
        }
        cursor = next;
    }
}

async fn migrate_keys(conn: &mut Conn, rename: &Rename) -> Result<u64> {
    let pattern = rename.key_pattern();
    let mut moved = 0;
    let mut cursor = "0".to_owned();
    loop {
        let (next, found): (String, Vec<RedisValue>) =
            conn.scan(&cursor, &pattern, SCAN_COUNT).await?;
        let pairs: Vec<(String, String)> = found
            .iter()
            .filter_map(|v| match v {
                RedisValue::BulkString(b) => String::from_utf8(b.clone()).ok(),
                _ => None,
            })
            .filter_map(|old| rename.key(&old).map(|new| (old, new)))
            .collect();
        for chunk in pairs.chunks(BATCH) {
            let mut inv = scripts::MIGRATE_KEYS.prepare_invoke();
            for (old, new) in chunk {
                inv.key(old).key(new);
            }
            let n: u64 = conn.script(&inv).await?;
            moved += n;
        }
        if next == "0" {
            return Ok(moved);
        }
        cursor = next;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HASH: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    fn text(b: Option<Vec<u8>>) -> Option<String> {
        b.map(|b| String::from_utf8(b).expect("utf-8"))
    }

    #[test]
    fn a_queued_job_changes_only_its_queue() {
        let r = Rename::new("", "old", "new");
        let raw = r#"{"class":"W","args":[123456789012345678901234567890,0.1],"queue":"old","x":{"b":1,"a":2}}"#;
        assert_eq!(
            text(r.queued_job(raw.as_bytes())).as_deref(),
            Some(
                r#"{"class":"W","args":[123456789012345678901234567890,0.1],"queue":"new","x":{"b":1,"a":2}}"#
            )
        );
        assert_eq!(r.queued_job(b"{oops"), None);
    }

    #[test]
    fn retry_queue_and_idempotency_key_follow_when_they_name_the_old_queue() {
        let r = Rename::new("ns:", "old", "new");
        let raw = format!(
            r#"{{"queue":"old","retry_queue":"old","idempotency_key":"ns:duplicate:old:{HASH}"}}"#
        );
        assert_eq!(
            text(r.set_job(raw.as_bytes())),
            Some(format!(
                r#"{{"queue":"new","retry_queue":"new","idempotency_key":"ns:duplicate:new:{HASH}"}}"#
            ))
        );
        let bare = format!(r#"{{"queue":"old","idempotency_key":"duplicate:old:{HASH}"}}"#);
        assert_eq!(
            text(r.set_job(bare.as_bytes())),
            Some(format!(
                r#"{{"queue":"new","idempotency_key":"duplicate:new:{HASH}"}}"#
            ))
        );
        let other = r#"{"queue":"old","retry_queue":"slow"}"#;
        assert_eq!(
            text(r.set_job(other.as_bytes())).as_deref(),
            Some(r#"{"queue":"new","retry_queue":"slow"}"#)
        );
    }

    #[test]
    fn set_jobs_of_other_queues_are_left_alone() {
        let r = Rename::new("", "old", "new");
        assert_eq!(r.set_job(br#"{"queue":"older"}"#), None);
        assert_eq!(r.set_job(br#"{"queue":"other"}"#), None);
        assert_eq!(r.set_job(b"not json"), None);
        // A job of another queue whose retries go to the old one keeps its queue.
        assert_eq!(
            text(r.set_job(br#"{"queue":"x","retry_queue":"old"}"#)).as_deref(),
            Some(r#"{"queue":"x","retry_queue":"new"}"#)
        );
    }

    #[test]
    fn only_the_old_queues_keys_are_renamed() {
        let r = Rename::new("resque:gitlab:", "a", "b");
        assert_eq!(
            r.key(&format!("resque:gitlab:duplicate:a:{HASH}")),
            Some(format!("resque:gitlab:duplicate:b:{HASH}"))
        );
        assert_eq!(
            r.key(&format!("resque:gitlab:duplicate:a:{HASH}:wal_locations")),
            Some(format!("resque:gitlab:duplicate:b:{HASH}:wal_locations"))
        );
        // Queue "a:c" is another queue.
        assert_eq!(r.key(&format!("resque:gitlab:duplicate:a:c:{HASH}")), None);
        assert_eq!(r.key(&format!("duplicate:a:{HASH}")), None);
        assert_eq!(r.key("resque:gitlab:duplicate:a:short"), None);
    }

    #[test]
    fn the_scan_pattern_escapes_glob_characters() {
        let r = Rename::new("n*", "q[1]", "x");
        assert_eq!(r.key_pattern(), r"n\*duplicate:q\[1\]:*");
    }
}
