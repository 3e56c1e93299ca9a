//! GitLab-style deduplication of idempotent jobs, on Sidekiq's wire format as GitLab writes it.
//!
//! A deduplicated push takes the job's idempotency key, `duplicate:<queue>:<sha256 hex of
//! "<class>:<args JSON>">`, with `SET NX EX ttl` in the same atomic step as the push itself
//! ([`push`]: one round trip for any number of jobs). A job that finds the key held is a
//! duplicate of the holder: dropped if its worker is idempotent (and the queue's
//! `disable_<queue>_deduplication` flag is off), else pushed with a `duplicate-of` mark.
//!
//! The server side folds into calls a fetcher makes anyway ([`Release`]): `until_executing` releases
//! the key with an unreplied write as the job starts (a batch's releases together, when it arrives,
//! once the class is known); `until_executed` releases it in the
//! job's acknowledgement (one unreplied `EVAL` that also does the `LREM`) or in `fail.lua`. A release
//! compares the jid, so it never deletes a key a newer job holds; with `reschedule_once` it re-enqueues
//! the job once when a duplicate was dropped meanwhile, in the same step.
//!
//! Latest-wins metadata: a dropped duplicate's `wal_locations` (name → position) are kept beside the
//! key when newer than what is kept (`"0/D525E3A8"`-style positions compare as hex pairs, plain
//! numbers numerically), and handed to the job that runs, merged with its own by the same rule.

use std::borrow::Cow;
use std::cmp::Ordering;
use std::sync::LazyLock;

use memchr::memmem::Finder;

use redis::ScriptInvocation;
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::clock::now_f64;
use crate::fetch::Unit;
use crate::job::Job;
use crate::job_json::TopLevel;
use crate::keys::Keys;
use crate::scripts;

mod packed;
mod push;

pub use packed::{push_new_one_sync, OnePush};
pub use push::{
    outcomes, push_invocation, push_sync, DedupJob, FlagCheck, Outcome, Positions, PushOptions,
};

/// GitLab's default lifetime of an idempotency key.
pub const DEFAULT_TTL_SECS: u64 = 6 * 60 * 60;

/// Job fields written by deduplication (GitLab's names).
pub const IDEMPOTENCY_KEY: &str = "idempotency_key";
pub const DUPLICATE_OF: &str = "duplicate-of";
pub const RESCHEDULED_ONCE: &str = "rescheduled_once";
pub const WAL_LOCATIONS: &str = "wal_locations";

/// SHA-256 hex of `"<class>:<args JSON>"`, the last part of an idempotency key.
pub fn digest(class: &str, args_json: &[u8]) -> String {
    hex_string(&digest_hex(class, args_json))
}

/// [`digest`]'s hex digits, on the stack: a push writes them into its command where they go.
pub fn digest_hex(class: &str, args_json: &[u8]) -> [u8; 64] {
    let mut hasher = Sha256::new();
    hasher.update(class.as_bytes());
    hasher.update(b":");
    hasher.update(args_json);
    let mut digits = [0; 64];
    hex_into(&hasher.finalize(), &mut digits);
    digits
}

/// A new jid: 12 random bytes in hex, as Sidekiq makes them.
pub fn new_jid() -> String {
    let mut digits = [0; 24];
    hex_into(&rand::random::<[u8; 12]>(), &mut digits);
    hex_string(&digits)
}

/// Lowercase hex of `bytes` into `out` (twice as long), by table: on every push (the jid, and the
/// digest of a deduplicated one), where `write!` per byte cost ~1 µs.
fn hex_into(bytes: &[u8], out: &mut [u8]) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    for (pair, b) in out.chunks_exact_mut(2).zip(bytes) {
        pair[0] = DIGITS[usize::from(b >> 4)];
        pair[1] = DIGITS[usize::from(b & 0x0f)];
    }
}

/// Hex digits as a String (they are ASCII).
fn hex_string(digits: &[u8]) -> String {
    digits.iter().copied().map(char::from).collect()
}

/// The feature flag that turns dropping off for a queue (GitLab's name).
pub fn flag_name(queue: &str) -> String {
    ["disable_", queue, "_deduplication"].concat()
}

/// Searchers for the two fields deduplication looks for in a job's bytes, built once (building one
/// costs more than searching a job with it; `memmem::find` builds one on every call).
pub(super) static KEY_FIELD: LazyLock<Finder<'static>> =
    LazyLock::new(|| Finder::new(b"\"idempotency_key\""));
pub(super) static WAL_FIELD: LazyLock<Finder<'static>> =
    LazyLock::new(|| Finder::new(b"\"wal_locations\""));

/// A job's `wal_locations` as (name, position) pairs; numbers keep their digits.
fn positions_of(job: &Job) -> Vec<(String, String)> {
    let Some(Value::Object(map)) = job.get(WAL_LOCATIONS) else {
        return Vec::new();
    };
    map.iter()
        .filter_map(|(name, v)| match v {
            Value::String(s) => Some((name.clone(), s.clone())),
            Value::Number(n) => Some((name.clone(), n.to_string())),
            _ => None,
        })
        .collect()
}

/// A replication position: `"hi/lo"` in hex (a Postgres LSN) or a plain number.
fn position(p: &str) -> Option<(f64, f64)> {
    if let Some((hi, lo)) = p.split_once('/') {
        let hi = u64::from_str_radix(hi, 16).ok()?;
        let lo = u64::from_str_radix(lo, 16).ok()?;
        return Some((hi as f64, lo as f64));
    }
    p.parse::<f64>().ok().map(|n| (n, 0.0))
}

/// Whether position `a` is newer than `b`, as `dedup_fns.lua` decides it (unreadable positions
/// compare as strings).
pub fn newer(a: &str, b: &str) -> bool {
    match (position(a), position(b)) {
        (Some(x), Some(y)) => x.partial_cmp(&y) == Some(Ordering::Greater),
        _ => a > b,
    }
}

/// The running job's own positions merged with those kept for it (`wal:<name>` fields of the side
/// hash, as a flat field/value list), newest wins; the job's own order first.
pub fn merge_positions(raw_job: &[u8], kept: &[String]) -> Vec<(String, String)> {
    let mut merged = Job::parse(raw_job)
        .map(|j| positions_of(&j))
        .unwrap_or_default();
    for pair in kept.chunks_exact(2) {
        let Some(name) = pair[0].strip_prefix("wal:") else {
            continue;
        };
        match merged.iter_mut().find(|(n, _)| n == name) {
            Some((_, pos)) if newer(&pair[1], pos) => pair[1].clone_into(pos),
            Some(_) => {}
            None => merged.push((name.to_owned(), pair[1].clone())),
        }
    }
    merged
}

/// Deletes the idempotency keys (and side hashes) their jobs still hold: the releases as jobs start
/// (`until_executing`), any number in one call — one `MGET`, one `DEL`, so a batch's releases cost
/// Redis one script call and not one each. KEYS: per job its key, then its side hash; ARGV: per job
/// its jid. Sent unreplied as `EVAL` (a `NOSCRIPT` would go unseen), so short.
const RELEASE_AT_START: &str = "local k={} for i=1,#ARGV do k[i]=KEYS[2*i-1] end local h=redis.call('MGET',unpack(k)) local d={} for i=1,#ARGV do if h[i]==ARGV[i] then d[#d+1]=KEYS[2*i-1] d[#d+1]=KEYS[2*i] end end if #d>0 then redis.call('DEL',unpack(d)) end return #d/2";

/// The releases of `releases` as their jobs start, in one script call (see `RELEASE_AT_START`).
pub fn start_command(releases: &[Release]) -> redis::Cmd {
    let mut cmd = redis::cmd("EVAL");
    cmd.arg(RELEASE_AT_START).arg(2 * releases.len());
    for release in releases {
        cmd.arg(&release.key)
            .arg(Keys::duplicate_meta(&release.key));
    }
    for release in releases {
        cmd.arg(&release.jid);
    }
    cmd
}

/// How a running deduplicated job gives back its key.
#[derive(Debug, Clone)]
pub struct Release {
    /// Its `idempotency_key`.
    pub key: String,
    pub jid: String,
    /// TTL for the key a rescheduled copy takes.
    pub ttl: u64,
    /// `reschedule_once`: re-enqueue the job once if a duplicate was dropped while it held the key.
    pub reschedule: bool,
}

impl Release {
    /// The job to re-enqueue and its jid: a fresh copy of `raw` (new jid and times, no retry
    /// bookkeeping) marked `rescheduled_once`. `None` unless `reschedule` and the job is readable.
    fn rescheduled(&self, raw: &[u8]) -> Option<(String, String)> {
        if !self.reschedule {
            return None;
        }
        let mut job = Job::parse(raw).ok()?;
        let jid = new_jid();
        let now = now_f64();
        let form = job.time_form();
        job.set("jid", Value::String(jid.clone()));
        for field in [
            DUPLICATE_OF,
            "retry_count",
            "failed_at",
            "retried_at",
            "error_message",
            "error_class",
            "error_backtrace",
        ] {
            job.remove(field);
        }
        job.set(RESCHEDULED_ONCE, Value::Bool(true));
        job.set_time("created_at", now, form);
        job.set_time("enqueued_at", now, form);
        Some((job.to_json(), jid))
    }

    /// The `dedup_release.lua` command for `unit`: releases the key (`release`), acknowledges the
    /// job first (`ack`), returns the side hash (`read`). Sent as `EVAL`, safe to write unreplied.
    pub fn command(
        &self,
        keys: &Keys,
        unit: &Unit,
        release: bool,
        ack: bool,
        read: bool,
    ) -> redis::Cmd {
        if release && !ack && !read {
            return start_command(std::slice::from_ref(self));
        }
        let (job, new_jid) = if release && ack {
            self.rescheduled(&unit.raw).unwrap_or_default()
        } else {
            Default::default()
        };
        let mut cmd = redis::cmd("EVAL");
        cmd.arg(scripts::DEDUP_RELEASE_SOURCE.as_str())
            .arg(5)
            .arg(&self.key)
            .arg(Keys::duplicate_meta(&self.key))
            .arg(keys.queue(&unit.queue))
            .arg(keys.queues())
            .arg(&*unit.working)
            .arg(if release { self.jid.as_str() } else { "" })
            .arg(job)
            .arg(new_jid)
            .arg(self.ttl)
            .arg(&*unit.queue)
            .arg(if ack { unit.raw.as_slice() } else { b"" })
            .arg(if read { "1" } else { "0" });
        cmd
    }

    /// Adds the release to a `fail.lua` call (KEYS[7..10], ARGV[8..12]); `reschedule` only when the
    /// failed job will not be retried (a retry does the work anyway).
    pub fn extend_fail(
        &self,
        inv: &mut ScriptInvocation<'static>,
        keys: &Keys,
        unit: &Unit,
        reschedule: bool,
    ) {
        let (job, new_jid) = if reschedule {
            self.rescheduled(&unit.raw).unwrap_or_default()
        } else {
            Default::default()
        };
        inv.key(&self.key)
            .key(Keys::duplicate_meta(&self.key))
            .key(keys.queue(&unit.queue))
            .key(keys.queues())
            .arg(&self.jid)
            .arg(job)
            .arg(new_jid)
            .arg(self.ttl)
            .arg(&*unit.queue);
    }
}

/// The idempotency key, jid and class of a job that may hold its key and carries no positions to
/// hand over: it has `idempotency_key`, and neither `duplicate-of` (a marked duplicate never holds
/// the key) nor `wal_locations`, at its top level. A byte search first, so other jobs cost no scan;
/// then one pass over the top-level fields (`job_json`), a full parse only for escaped strings.
pub fn plain_holder(raw: &[u8]) -> Option<(String, String, String)> {
    KEY_FIELD.find(raw)?;
    let (mut key, mut jid, mut class) = (None, None, None);
    let mut escaped = false;
    let mut fields = TopLevel::new(raw);
    for field in fields.by_ref() {
        let slot = match field.key {
            b"idempotency_key" => &mut key,
            b"jid" => &mut jid,
            b"class" => &mut class,
            b"duplicate-of" | b"wal_locations" => return None,
            _ => continue,
        };
        let (value, has_escape) = field.string?;
        escaped |= has_escape;
        *slot = Some(value);
    }
    if fields.malformed() {
        return None;
    }
    if escaped {
        // Rare: let serde unescape them.
        let peek: Peek<'_> = serde_json::from_slice(raw).ok()?;
        return Some((
            peek.idempotency_key?.into_owned(),
            peek.jid?.into_owned(),
            peek.class?.into_owned(),
        ));
    }
    let text = |v: Option<&[u8]>| std::str::from_utf8(v?).ok().map(str::to_owned);
    Some((text(key)?, text(jid)?, text(class)?))
}

#[derive(serde::Deserialize)]
struct Peek<'a> {
    #[serde(borrow, default)]
    idempotency_key: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    jid: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    class: Option<Cow<'a, str>>,
}

/// The bytes of `cmd` for a write whose reply is not read ([`crate::link::blocking::SyncConn`]
/// switches the connection's replies off first: `link/reply_mode.rs`).
pub fn unreplied(cmd: &redis::Cmd) -> Vec<u8> {
    cmd.get_packed_command()
}

/// Sets (`on`) or clears a feature flag in `jq:features`.
pub fn set_flag_cmd(keys: &Keys, name: &str, on: bool) -> redis::Cmd {
    let mut cmd = redis::cmd(if on { "HSET" } else { "HDEL" });
    cmd.arg(keys.features()).arg(name);
    if on {
        cmd.arg("1");
    }
    cmd
}

/// Reads every feature flag (a flat field/value list).
pub fn flags_cmd(keys: &Keys) -> redis::Cmd {
    let mut cmd = redis::cmd("HGETALL");
    cmd.arg(keys.features());
    cmd
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digest_is_sha256_hex_of_class_colon_args() {
        // printf '%s' 'AuthorizedProjectsWorker:[42]' | sha256sum
        assert_eq!(
            digest("AuthorizedProjectsWorker", b"[42]"),
            "30aaef31bf07a7522f054eda0fe1ce71cfc8a8a770308d27fb626b410615588f"
        );
        // printf '%s' 'W:[]' | sha256sum
        assert_eq!(
            digest("W", b"[]"),
            "89ceac7d1b754535cee78c46892ed71881631bf13cd46126916ff7651abda617"
        );
    }

    #[test]
    fn the_key_is_spliced_in_or_set_by_a_rewrite() {
        let (json, positions) =
            push::with_key(br#"{"class":"W","args":[1.50]}"#, "duplicate:q:a\"b").expect("ok");
        assert_eq!(
            String::from_utf8(json).expect("utf-8"),
            r#"{"class":"W","args":[1.50],"idempotency_key":"duplicate:q:a\"b"}"#
        );
        assert!(positions.is_empty());
        let raw = br#"{"idempotency_key":"old","args":[1.50],"wal_locations":{"main":"0/A"}}"#;
        let (json, positions) = push::with_key(raw, "new").expect("ok");
        assert_eq!(
            String::from_utf8(json).expect("utf-8"),
            r#"{"idempotency_key":"new","args":[1.50],"wal_locations":{"main":"0/A"}}"#
        );
        assert_eq!(positions, vec![("main".to_owned(), "0/A".to_owned())]);
    }

    #[test]
    fn positions_compare_as_lsns_or_numbers() {
        assert!(newer("0/D525E3A8", "0/D525E3A7"));
        assert!(newer("1/0", "0/FFFFFFFF"));
        assert!(!newer("0/A", "0/A"));
        assert!(newer("10", "9"));
        assert!(!newer("9", "10"));
    }

    #[test]
    fn merge_keeps_the_newest_and_adds_unknown_names() {
        let raw = br#"{"jid":"j","wal_locations":{"main":"0/10","ci":"0/5"}}"#;
        let kept: Vec<String> = [
            "dropped", "1", "wal:main", "0/F", "wal:ci", "0/6", "wal:geo", "7",
        ]
        .map(String::from)
        .to_vec();
        assert_eq!(
            merge_positions(raw, &kept),
            vec![
                ("main".to_owned(), "0/10".to_owned()),
                ("ci".to_owned(), "0/6".to_owned()),
                ("geo".to_owned(), "7".to_owned()),
            ]
        );
    }

    #[test]
    fn a_plain_holder_is_read_at_the_top_level() {
        let raw = br#"{"class":"W","args":[{"jid":"inner","wal_locations":{}}],"jid":"j1","idempotency_key":"duplicate:q:abc"}"#;
        assert_eq!(
            plain_holder(raw),
            Some(("duplicate:q:abc".into(), "j1".into(), "W".into()))
        );
        let escaped = br#"{"class":"A\u0042","jid":"j1","idempotency_key":"k"}"#;
        assert_eq!(
            plain_holder(escaped),
            Some(("k".into(), "j1".into(), "AB".into()))
        );
        for not_one in [
            &br#"{"class":"W","jid":"j1","idempotency_key":"k","duplicate-of":"j0"}"#[..],
            br#"{"class":"W","jid":"j1","idempotency_key":"k","wal_locations":{"main":"0/1"}}"#,
            br#"{"class":"W","idempotency_key":"k"}"#,
            br#"{"class":"W","jid":1,"idempotency_key":"k"}"#,
            br#"{"class":"W","jid":"j1","idempotency_key":"k"#,
            br#"{"class":"W","jid":"j1"}"#,
        ] {
            assert_eq!(
                plain_holder(not_one),
                None,
                "{}",
                String::from_utf8_lossy(not_one)
            );
        }
    }

    #[test]
    fn outcomes_read_the_script_reply() {
        let reply = ["", "mabc", "dxyz"].map(String::from).to_vec();
        assert_eq!(
            outcomes(reply),
            vec![
                Outcome::Pushed,
                Outcome::Marked("abc".into()),
                Outcome::Dropped("xyz".into())
            ]
        );
    }

    #[test]
    fn a_rescheduled_copy_has_a_new_jid_and_the_mark() {
        let rel = Release {
            key: "duplicate:q:x".into(),
            jid: "old".into(),
            ttl: 60,
            reschedule: true,
        };
        let raw = br#"{"class":"W","args":[12345678901234567890123],"jid":"old","retry_count":2,"duplicate-of":"z"}"#;
        let (json, jid) = rel.rescheduled(raw).expect("readable");
        assert_eq!(jid.len(), 24);
        assert!(json.starts_with(&format!(
            r#"{{"class":"W","args":[12345678901234567890123],"jid":"{jid}","rescheduled_once":true,"created_at":"#
        )), "{json}");
        assert!(
            !json.contains("retry_count") && !json.contains("duplicate-of"),
            "{json}"
        );
    }

    #[test]
    fn a_rescheduled_sidekiq_8_job_keeps_millisecond_times() {
        let rel = Release {
            key: "duplicate:q:x".into(),
            jid: "old".into(),
            ttl: 60,
            reschedule: true,
        };
        let raw = br#"{"class":"W","args":[],"jid":"old","created_at":1763985600123,"failed_at":1763985601000}"#;
        let (json, _) = rel.rescheduled(raw).expect("readable");
        let job = Job::parse(&json).unwrap();
        assert!(job.get("created_at").is_some_and(Value::is_i64), "{json}");
        assert!(job.get("enqueued_at").is_some_and(Value::is_i64), "{json}");
        assert!(job.get("failed_at").is_none(), "{json}");
    }
}
