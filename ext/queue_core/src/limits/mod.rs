//! Concurrency and rate limits per worker class (GitLab's `concurrency_limit`, Solid Queue's
//! `limits_concurrency`, Sidekiq Enterprise's window and bucket limiters), counted cluster-wide in
//! Redis.
//!
//! The check happens when a job is about to start, never at fetch: Ruby knows the class (it has
//! parsed the job anyway), evaluates the limit and the key (they are Ruby values, lambdas included)
//! and asks [`crate::fetch::Fetcher::limit`], which runs `limit_acquire.lua` once. A class without
//! limits never gets here: no Redis command, no engine call. Outcomes:
//! - **run**: a slot is taken (`jq:limit:run:<lkey>`, jid → this process's identity, and the jid in
//!   `jq:limit:held:<identity>`) and a rate token spent;
//! - **deferred** (concurrency): the job leaves the working list for its limit's deferred list
//!   (FIFO); it holds no thread and nothing polls it. When a slot frees (`limit_release.lua`, written
//!   unreplied after the job's acknowledgement) the oldest deferred job goes to the right of its queue,
//!   taken next, with the slot reserved under its jid, so resumption follows arrival order;
//! - **scheduled** (rate): the job, unchanged (not a retry), goes to `schedule` at the time its
//!   booking in the limiter allows; the booking makes that time exact, so a burst does not come back
//!   at once.
//!
//! A dead process's slots come back when liveness recovers it ([`recover`]): each becomes a
//! reservation for the job that held it, now back at the head of its queue. A periodic pump
//! ([`pump`], every liveness beat and after [`publish`]) resumes jobs into slots a raised limit
//! opened (`concurrency_limit 0` holds jobs until it rises) and drops reservations of resumed jobs
//! that never came (deleted by hand, or acknowledged just before a crash).

use redis::ScriptInvocation;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, LazyLock};
use std::time::Duration;

use crate::error::{Error, Result};
use crate::fetch::Unit;
use crate::keys::Keys;
use crate::link::connection::Conn;
use crate::scripts::compact;

/// How long a resumed job's reserved slot waits for the job to be taken before the pump frees it.
pub const RESERVATION_MS: u64 = 60_000;

macro_rules! with_lib {
    ($file:literal) => {
        concat!(
            include_str!("../scripts/limit_lib.lua"),
            include_str!(concat!("../scripts/", $file))
        )
    };
}

pub mod lease;
pub use lease::{Ask, Leases};

static ACQUIRE: LazyLock<redis::Script> =
    LazyLock::new(|| redis::Script::new(with_lib!("limit_acquire.lua")));
static RECOVER: LazyLock<redis::Script> =
    LazyLock::new(|| redis::Script::new(with_lib!("limit_recover.lua")));
static PUMP: LazyLock<redis::Script> =
    LazyLock::new(|| redis::Script::new(with_lib!("limit_pump.lua")));
/// Sent as `EVAL` with its text, since it is written unreplied (a `NOSCRIPT` would go unseen).
static RELEASE_SOURCE: LazyLock<String> = LazyLock::new(|| compact(with_lib!("limit_release.lua")));

/// A rate limiter's kind, as Sidekiq Enterprise names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RateKind {
    /// At most `count` starts in any `per` seconds (a sliding window).
    Window,
    /// A bucket of `count` tokens refilled evenly over `per` seconds.
    Bucket,
}

impl RateKind {
    pub fn parse(name: &str) -> Result<RateKind> {
        match name {
            "window" => Ok(RateKind::Window),
            "bucket" => Ok(RateKind::Bucket),
            other => Err(Error::InvalidArgument(format!(
                "unknown rate limit kind {other:?} (window or bucket)"
            ))),
        }
    }

    fn name(self) -> &'static str {
        match self {
            RateKind::Window => "window",
            RateKind::Bucket => "bucket",
        }
    }
}

/// A job's rate limit.
#[derive(Debug, Clone, PartialEq)]
pub struct Rate {
    /// `<class>` or `<class>[<key>]`.
    pub key: String,
    pub kind: RateKind,
    pub count: u64,
    pub per: f64,
}

/// The limits of the running job, as Ruby evaluated them.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    pub class: String,
    pub jid: String,
    /// The concurrency limit's key and its limit, if the class has one.
    pub concurrency: Option<(String, u64)>,
    pub rate: Option<Rate>,
}

/// What became of a job whose limits were checked.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// It may start; it holds a slot if it has a concurrency limit.
    Run,
    /// Over its concurrency limit: waiting in its limit's deferred list.
    Deferred,
    /// Over its rate limit: in `schedule` for this time (epoch seconds).
    Scheduled(f64),
    /// No longer in the working list (recovery put it back meanwhile): not to run here.
    Gone,
}

/// A slot the running job holds, given back when it settles.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Held {
    /// The limit's key (shared with the process's lease of it, if any).
    pub lkey: Arc<str>,
    /// The job's jid, or the leased slot's field (`L:<identity>:<n>`).
    pub jid: String,
    /// A slot of the process's lease ([`lease`]): given back in memory, or kept by its fetcher for
    /// the next job of its limit.
    pub lease: Option<SlotLease>,
}

/// What a leased slot knows of its lease: the cap it was leased under, and whether jobs of its
/// limit wait (then it goes back through Redis as it frees).
#[derive(Debug, Clone)]
pub struct SlotLease {
    pub cap: u64,
    contended: Arc<AtomicBool>,
}

impl SlotLease {
    /// Whether jobs of the limit wait, as the keeper last saw: the slot is not to be kept.
    pub fn contended(&self) -> bool {
        self.contended.load(Ordering::Relaxed)
    }
}

impl PartialEq for SlotLease {
    fn eq(&self, other: &Self) -> bool {
        self.cap == other.cap && Arc::ptr_eq(&self.contended, &other.contended)
    }
}

impl Eq for SlotLease {}

/// What `limit_acquire.lua` leased along with a job that runs: slots and rate tokens.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Granted {
    pub slots: u64,
    pub tokens: u64,
}

/// The limit key of `class` for `key` (none: the class itself).
pub fn limit_key(class: &str, key: Option<&str>) -> String {
    match key {
        Some(k) => format!("{class}[{k}]"),
        None => class.to_owned(),
    }
}

/// The `limit_acquire.lua` call for `unit`, run by `identity`, asking for the leases in `ask`.
pub fn acquire_invocation(
    keys: &Keys,
    identity: &str,
    unit: &Unit,
    req: &Request,
    ask: &Ask,
) -> ScriptInvocation<'static> {
    let mut inv = ACQUIRE.prepare_invoke();
    inv.key(&*unit.working)
        .key(keys.schedule())
        .arg(keys.namespace())
        .arg(&unit.raw)
        .arg(identity)
        .arg(&req.jid)
        .arg(&*unit.queue);
    match &req.concurrency {
        Some((lkey, cap)) => inv.arg(lkey).arg(*cap),
        None => inv.arg("").arg(0),
    };
    match &req.rate {
        Some(r) => inv
            .arg(r.kind.name())
            .arg(&r.key)
            .arg(r.count)
            .arg(r.per.to_string()),
        None => inv.arg("").arg("").arg(0).arg(0),
    };
    inv.arg(ask.slots)
        .arg(Leases::field_prefix(identity))
        .arg(ask.first)
        .arg(ask.tokens)
        .arg(secs(lease::TOKENS_VALID))
        .arg(format!("{identity}#{}", ask.name));
    inv
}

fn secs(d: Duration) -> String {
    format!("{:.3}", d.as_secs_f64())
}

/// Reads `limit_acquire.lua`'s reply.
pub fn outcome(reply: Vec<String>) -> Result<Outcome> {
    outcome_granted(reply).map(|(o, _)| o)
}

/// Reads `limit_acquire.lua`'s reply, with what it leased.
pub fn outcome_granted(reply: Vec<String>) -> Result<(Outcome, Granted)> {
    let n = |i: usize| reply.get(i).and_then(|s| s.parse().ok()).unwrap_or(0);
    let granted = Granted {
        slots: n(1),
        tokens: n(2),
    };
    let outcome = match reply.first().map(String::as_str) {
        Some("run") => return Ok((Outcome::Run, granted)),
        Some("deferred") => Ok(Outcome::Deferred),
        Some("gone") => Ok(Outcome::Gone),
        Some("scheduled") => reply
            .get(1)
            .and_then(|s| s.parse().ok())
            .map(Outcome::Scheduled)
            .ok_or_else(|| Error::redis(format!("limit_acquire.lua answered {reply:?}"))),
        _ => Err(Error::redis(format!(
            "limit_acquire.lua answered {reply:?}"
        ))),
    };
    outcome.map(|o| (o, Granted::default()))
}

/// The unreplied `limit_release.lua` packet that gives `held` back.
pub fn release_packet(keys: &Keys, identity: &str, held: &Held) -> Vec<u8> {
    redis::cmd("EVAL")
        .arg(RELEASE_SOURCE.as_str())
        .arg(0)
        .arg(keys.namespace())
        .arg(identity)
        .arg(&held.jid)
        .arg(&*held.lkey)
        .get_packed_command()
}

/// Hands the slots of the dead process `identity` to its recovered jobs (reservations under their
/// jids). Returns how many slots it held.
pub async fn recover(conn: &mut Conn, identity: &str) -> Result<u64> {
    let prefix = conn.keys().namespace().to_owned();
    let mut inv = RECOVER.prepare_invoke();
    inv.arg(prefix).arg(identity);
    conn.script(&inv).await
}

/// Resumes deferred jobs into free slots, for every limit with deferred jobs. One `SMEMBERS` when
/// none waits. Returns how many resumed.
pub async fn pump(conn: &mut Conn) -> Result<u64> {
    let prefix = conn.keys().namespace().to_owned();
    let mut inv = PUMP.prepare_invoke();
    inv.arg(prefix).arg(RESERVATION_MS);
    conn.script(&inv).await
}

/// Records the concurrency limits of worker classes (as Ruby read them: a lambda's current value),
/// then pumps, so a limit that rose lets deferred jobs go at once.
pub async fn publish(conn: &mut Conn, caps: &[(String, u64)]) -> Result<u64> {
    if !caps.is_empty() {
        let mut cmd = redis::cmd("HSET");
        cmd.arg(conn.keys().limits());
        for (class, cap) in caps {
            cmd.arg(class).arg(*cap);
        }
        conn.cmd::<i64>(&cmd).await?;
    }
    pump(conn).await
}

/// `HGETALL` of a class → count hash.
pub(crate) type Counts = Vec<(String, i64)>;

/// One worker class's concurrency figures, cluster-wide.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClassStats {
    pub class: String,
    pub limit: Option<i64>,
    /// Slots held: running jobs, and resumed ones on their way.
    pub running: i64,
    pub deferred: i64,
}

/// Every class with a concurrency limit: limit, running, deferred. Three `HGETALL`s.
pub async fn stats(conn: &mut Conn) -> Result<Vec<ClassStats>> {
    let keys = conn.keys().clone();
    let mut pipe = redis::pipe();
    pipe.cmd("HGETALL").arg(keys.limits());
    pipe.cmd("HGETALL").arg(keys.limits_running());
    pipe.cmd("HGETALL").arg(keys.limits_deferred());
    let (limits, running, deferred): (Counts, Counts, Counts) = conn.pipe(&pipe).await?;
    Ok(merge_stats(limits, running, deferred))
}

/// The three hashes' fields as one row per class.
pub(crate) fn merge_stats(limits: Counts, running: Counts, deferred: Counts) -> Vec<ClassStats> {
    let mut out: Vec<ClassStats> = Vec::new();
    let mut entry = |class: String| -> usize {
        match out.iter().position(|s| s.class == class) {
            Some(i) => i,
            None => {
                out.push(ClassStats {
                    class,
                    limit: None,
                    running: 0,
                    deferred: 0,
                });
                out.len() - 1
            }
        }
    };
    let mut rows: Vec<(String, u8, i64)> = Vec::new();
    rows.extend(limits.into_iter().map(|(c, n)| (c, 0, n)));
    rows.extend(running.into_iter().map(|(c, n)| (c, 1, n)));
    rows.extend(deferred.into_iter().map(|(c, n)| (c, 2, n)));
    let mut indexed = Vec::with_capacity(rows.len());
    for (class, kind, n) in rows {
        indexed.push((entry(class), kind, n));
    }
    for (i, kind, n) in indexed {
        match kind {
            0 => out[i].limit = Some(n),
            1 => out[i].running = n.max(0),
            _ => out[i].deferred = n.max(0),
        }
    }
    out.sort_by(|a, b| a.class.cmp(&b.class));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limit_keys_name_the_class_and_the_key() {
        assert_eq!(limit_key("Mail", None), "Mail");
        assert_eq!(limit_key("Mail", Some("42")), "Mail[42]");
    }

    #[test]
    fn kinds_parse_or_say_which_exist() {
        assert_eq!(RateKind::parse("bucket").ok(), Some(RateKind::Bucket));
        let e = RateKind::parse("leaky").err().map(|e| e.to_string());
        assert!(e.is_some_and(|e| e.contains("window or bucket")));
    }

    #[test]
    fn outcomes_are_read() {
        let s = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(outcome(s(&["run"])).ok(), Some(Outcome::Run));
        assert_eq!(
            outcome_granted(s(&["run", "4", "16"])).ok(),
            Some((
                Outcome::Run,
                Granted {
                    slots: 4,
                    tokens: 16
                }
            ))
        );
        assert_eq!(
            outcome(s(&["scheduled", "12.5"])).ok(),
            Some(Outcome::Scheduled(12.5))
        );
        assert!(outcome(s(&["scheduled"])).is_err());
        assert!(outcome(s(&["what"])).is_err());
    }

    #[test]
    fn the_release_script_is_compacted() {
        assert!(!RELEASE_SOURCE.contains("--"));
        assert!(RELEASE_SOURCE.contains("local function lim_pump"));
    }

    #[test]
    fn stats_merge_by_class() {
        let s = merge_stats(
            vec![("B".into(), 2), ("A".into(), 0)],
            vec![("B".into(), 1)],
            vec![("A".into(), 5), ("C".into(), -1)],
        );
        assert_eq!(s.len(), 3);
        assert_eq!(s[0].class, "A");
        assert_eq!((s[0].limit, s[0].deferred), (Some(0), 5));
        assert_eq!((s[1].limit, s[1].running), (Some(2), 1));
        assert_eq!((s[2].limit, s[2].deferred), (None, 0));
    }
}
