//! The push side of deduplication: each job takes its idempotency key in the same atomic step as its
//! push, one round trip for any number of jobs.
//!
//! Two scripts do it. `dedup_push.lua` handles everything: many jobs, scheduled jobs, marks,
//! `wal_locations`, `reschedule_once`. `perform_async`'s common case is one immediate job that
//! records nothing beside its key. That case goes through `dedup_push_one.lua` instead, which takes
//! the key and queues the job, or drops a duplicate. It has the fewest keys, arguments and
//! `redis.call`s, and a script's cost in Redis grows with each of them. When the key is held and
//! something more is needed (a mark), it changes nothing and the general script runs in a second
//! round trip.

use redis::ScriptInvocation;

use crate::client::check_queue_name;
use crate::clock::{float_string, now_f64};
use crate::error::{Error, Result};
use crate::job::Job;
use crate::keys::Keys;
use crate::link::blocking::SyncConn;
use crate::link::wait_replicas;
use crate::metrics;
use crate::scripts;

use super::{digest, flag_name, positions_of, IDEMPOTENCY_KEY, KEY_FIELD, WAL_FIELD};

/// How a push learns whether its queue's flag turns dropping off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlagCheck {
    /// Read `jq:features` inside the push script (no extra round trip).
    Redis,
    /// The caller checked: dropping is off (`true`) or on (`false`).
    Given(bool),
}

/// What a deduplicated push needs to know of its worker.
#[derive(Debug, Clone)]
pub struct PushOptions {
    pub class: String,
    /// Seconds the key lives (a scheduled job's delay is added).
    pub ttl: u64,
    /// The worker is idempotent: duplicates are dropped rather than marked.
    pub idempotent: bool,
    /// `if_deduplicated: :reschedule_once`: a drop is recorded for the holder's release.
    pub reschedule: bool,
    pub flag: FlagCheck,
}

impl PushOptions {
    /// The flag field the script reads ('' for none) and whether it drops duplicates.
    pub(super) fn dropping(&self, queue: &str) -> (String, bool) {
        match self.flag {
            FlagCheck::Redis => (flag_name(queue), self.idempotent),
            FlagCheck::Given(off) => (String::new(), self.idempotent && !off),
        }
    }

    fn drops_field(&self, queue: &str) -> String {
        metrics::field::name(metrics::field::Kind::Dropped, queue, &self.class)
    }
}

/// One job to push: its jid, its JSON (without `idempotency_key`), the JSON of the arguments to
/// hash, and its run-at time if it is scheduled.
#[derive(Debug, Clone)]
pub struct DedupJob {
    pub jid: String,
    pub json: Vec<u8>,
    pub args: Vec<u8>,
    pub at: Option<f64>,
}

/// What became of one job of a deduplicated push.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Pushed; it holds its key.
    Pushed,
    /// Pushed with `duplicate-of: <jid>` (its worker is not idempotent, or dropping is off).
    Marked(String),
    /// Dropped as a duplicate of the job `jid`.
    Dropped(String),
}

/// Replication positions: (name, position) pairs, in the job's order.
pub type Positions = Vec<(String, String)>;

/// A job ready for a push script: its key, its JSON carrying the key, its positions, the key's TTL
/// and its run-at time ('' = now).
struct Entry<'a> {
    jid: &'a str,
    key: String,
    json: Vec<u8>,
    positions: Positions,
    ttl: u64,
    at: String,
}

impl Entry<'_> {
    fn of<'a>(
        keys: &Keys,
        queue: &str,
        opts: &PushOptions,
        job: &'a DedupJob,
        now: f64,
    ) -> Result<Entry<'a>> {
        if job.jid.is_empty() {
            return Err(Error::InvalidJob(
                "a deduplicated job needs a jid".to_owned(),
            ));
        }
        let key = keys.duplicate(queue, &digest(&opts.class, &job.args));
        let (json, positions) = with_key(&job.json, &key)?;
        let (ttl, at) = match job.at {
            Some(at) if !at.is_finite() => {
                return Err(Error::InvalidArgument(format!(
                    "scheduled time must be a finite number, got {at}"
                )))
            }
            Some(at) => (
                opts.ttl + (at - now).max(0.0).ceil() as u64,
                float_string(at),
            ),
            None => (opts.ttl, String::new()),
        };
        Ok(Entry {
            jid: &job.jid,
            key,
            json,
            positions,
            ttl,
            at,
        })
    }
}

pub(super) fn check(queue: &str, opts: &PushOptions) -> Result<()> {
    check_queue_name(queue)?;
    if opts.ttl == 0 {
        return Err(Error::InvalidArgument(
            "deduplication ttl must be at least one second".to_owned(),
        ));
    }
    Ok(())
}

fn entries<'a>(
    keys: &Keys,
    queue: &str,
    opts: &PushOptions,
    jobs: &'a [DedupJob],
    now: f64,
) -> Result<Vec<Entry<'a>>> {
    check(queue, opts)?;
    jobs.iter()
        .map(|job| Entry::of(keys, queue, opts, job, now))
        .collect()
}

/// The `dedup_push.lua` call for `jobs` of one worker onto `queue` (or the schedule).
pub fn push_invocation(
    keys: &Keys,
    queue: &str,
    opts: &PushOptions,
    jobs: &[DedupJob],
    now: f64,
) -> Result<ScriptInvocation<'static>> {
    let entries = entries(keys, queue, opts, jobs, now)?;
    Ok(general_invocation(keys, queue, opts, &entries))
}

fn general_invocation(
    keys: &Keys,
    queue: &str,
    opts: &PushOptions,
    entries: &[Entry<'_>],
) -> ScriptInvocation<'static> {
    let (flag_field, drop) = opts.dropping(queue);
    let mut inv = scripts::DEDUP_PUSH.prepare_invoke();
    inv.key(keys.queues())
        .key(keys.queue(queue))
        .key(keys.schedule())
        .key(keys.features())
        .key(keys.metrics())
        .arg(queue)
        .arg(flag_field)
        .arg(if drop { "1" } else { "0" })
        .arg(if opts.reschedule { "1" } else { "0" })
        .arg(opts.drops_field(queue));
    for entry in entries {
        inv.key(&entry.key).key(Keys::duplicate_meta(&entry.key));
        inv.arg(entry.jid)
            .arg(entry.ttl)
            .arg(&entry.at)
            .arg(&entry.json)
            .arg(entry.positions.len());
        for (name, position) in &entry.positions {
            inv.arg(name).arg(position);
        }
    }
    inv
}

/// [`one_command`] for one job, as [`push_sync`] builds it (for `packed`'s tests).
#[cfg(test)]
pub(super) fn one_command_for(
    keys: &Keys,
    queue: &str,
    opts: &PushOptions,
    job: &DedupJob,
) -> Option<redis::Cmd> {
    let entry = Entry::of(keys, queue, opts, job, now_f64()).ok()?;
    one_command(keys, queue, opts, &entry)
}

/// The `dedup_push_one.lua` call, when `entry` is the common case it takes: immediate, and nothing
/// to record beside the key (no positions, no `reschedule_once`). Written straight into one
/// `EVALSHA` command: a `ScriptInvocation` holds each key and argument in a buffer of its own and
/// copies them all into a command again when invoked, on every `perform_async`.
fn one_command(
    keys: &Keys,
    queue: &str,
    opts: &PushOptions,
    entry: &Entry<'_>,
) -> Option<redis::Cmd> {
    if !entry.at.is_empty() || !entry.positions.is_empty() || opts.reschedule {
        return None;
    }
    let (flag_field, drop) = opts.dropping(queue);
    let mut cmd = redis::Cmd::with_capacity(15, entry.json.len() + 2 * entry.key.len() + 160);
    cmd.arg("EVALSHA")
        .arg(scripts::DEDUP_PUSH_ONE.get_hash())
        .arg(5)
        .arg(keys.queues())
        .arg(keys.queue(queue))
        .arg(&entry.key)
        .arg(keys.features())
        .arg(keys.metrics())
        .arg(queue)
        .arg(entry.jid)
        .arg(entry.ttl)
        .arg(&entry.json)
        .arg(if drop { "1" } else { "0" })
        .arg(flag_field)
        .arg(opts.drops_field(queue));
    Some(cmd)
}

/// The job JSON with `"idempotency_key": key` added, and its `wal_locations`. A job without either
/// field (the common case) gets the field spliced in before its closing brace, without a parse;
/// otherwise it is parsed and rewritten (numbers keep their digits, fields their order).
pub(super) fn with_key(json: &[u8], key: &str) -> Result<(Vec<u8>, Positions)> {
    let plain = json.len() > 2
        && json.first() == Some(&b'{')
        && json.last() == Some(&b'}')
        && KEY_FIELD.find(json).is_none()
        && WAL_FIELD.find(json).is_none();
    if plain {
        let quoted = serde_json::to_string(key).map_err(|e| Error::InvalidJob(e.to_string()))?;
        let mut out = Vec::with_capacity(json.len() + quoted.len() + 20);
        out.extend_from_slice(&json[..json.len() - 1]);
        out.extend_from_slice(b",\"idempotency_key\":");
        out.extend_from_slice(quoted.as_bytes());
        out.push(b'}');
        return Ok((out, Vec::new()));
    }
    let mut parsed = Job::parse(json)?;
    parsed.set(IDEMPOTENCY_KEY, serde_json::Value::String(key.to_owned()));
    let positions = positions_of(&parsed);
    Ok((parsed.to_json().into_bytes(), positions))
}

/// Reads the script's reply: one status per job.
pub fn outcomes(reply: Vec<String>) -> Vec<Outcome> {
    reply.into_iter().map(outcome).collect()
}

pub(super) fn outcome(status: String) -> Outcome {
    match status.split_at_checked(1) {
        Some(("d", jid)) => Outcome::Dropped(jid.to_owned()),
        Some(("m", jid)) => Outcome::Marked(jid.to_owned()),
        _ => Outcome::Pushed,
    }
}

/// Pushes jobs of one worker with deduplication, on a caller's connection: one round trip, or two
/// when one job meets a held key that the common-case script leaves to the general one.
pub fn push_sync(
    conn: &mut SyncConn,
    queue: &str,
    opts: &PushOptions,
    jobs: &[DedupJob],
) -> Result<Vec<Outcome>> {
    let entries = entries(conn.keys(), queue, opts, jobs, now_f64())?;
    if entries.is_empty() {
        return Ok(Vec::new());
    }
    if let [entry] = entries.as_slice() {
        if let Some(cmd) = one_command(conn.keys(), queue, opts, entry) {
            // A nil reply wrote nothing (the general script follows): no replica need confirm it.
            let reply = wait_replicas::evalsha_sync_if(
                conn,
                &scripts::DEDUP_PUSH_ONE,
                &cmd,
                Option::<String>::is_some,
            )?;
            if let Some(status) = reply {
                return Ok(vec![outcome(status)]);
            }
        }
    }
    general_sync(conn, queue, opts, &entries)
}

/// Jobs pushed by the general script alone (`dedup_push.lua`), without trying the one-job script
/// first: what a job the one-job script left alone takes (`packed`).
pub(super) fn push_general_sync(
    conn: &mut SyncConn,
    queue: &str,
    opts: &PushOptions,
    jobs: &[DedupJob],
) -> Result<Vec<Outcome>> {
    let entries = entries(conn.keys(), queue, opts, jobs, now_f64())?;
    general_sync(conn, queue, opts, &entries)
}

fn general_sync(
    conn: &mut SyncConn,
    queue: &str,
    opts: &PushOptions,
    entries: &[Entry<'_>],
) -> Result<Vec<Outcome>> {
    let inv = general_invocation(conn.keys(), queue, opts, entries);
    Ok(outcomes(wait_replicas::script_sync::<Vec<String>>(
        conn, &inv,
    )?))
}
