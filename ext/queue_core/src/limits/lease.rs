//! Leases: a process takes several concurrency slots or rate tokens of a limit in one script call
//! and hands them to its jobs in memory, so a limit that does not bind costs its jobs no Redis call.
//!
//! - **Slots.** A slot leased is a field `L:<identity>:<n>` of the limit's `jq:limit:run:<lkey>`
//!   owned by the process (counted by `HLEN` like a job's slot, listed in `jq:limit:held:<identity>`
//!   so a crash frees it: `limit_recover.lua`). `limit_acquire.lua` grants one along with a job's own
//!   slot only while nothing is deferred and half the free slots stay free; the process asks for as
//!   many as it has threads (at most a quarter of the limit), and only for a limit of at least
//!   [`MIN_SLOTS_CAP`]. Taken and given back
//!   in memory; the limit is still exact across processes (a leased slot is a slot). The keeper
//!   ([`keep`], every [`KEEP_EVERY`]) gives the unused ones back when the limit is contended (jobs
//!   deferred, or resumed ones holding reservations: `limit_lease.lua`, which resumes them) or the
//!   class went idle here, and while contended the process takes no leased slot and gives each used
//!   one back through Redis as it frees. A resumed job that ran on a leased slot before the keeper
//!   saw the contention leaves its reservation behind: the keeper drops those after
//!   [`LEASED_RESERVATION_MS`].
//! - **Tokens.** A rate lease is `n` tokens taken at once, to be spent within [`TOKENS_VALID`] of
//!   asking; what is left then is dropped. The window records them as one member of weight `n` scored
//!   at the lease's end, the bucket refills from the lease's end: either counts the leased starts no
//!   earlier than they happen, so the limit stays exact. Granted only with four times the lease
//!   still free; the size doubles while leases run out in time and halves when tokens are dropped.
//! - **In a fetcher.** A thread keeps the slot of a job that settled for its next job of the same
//!   class, and spends tokens from a batch it took from the lease ([`TokenBatch`]), so that a
//!   limit that does not bind costs its jobs no lock either (`Fetcher::limit_leased_keys`).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use foldhash::fast::RandomState as FoldState;
use redis::Script;
use std::sync::LazyLock;
use tokio::sync::watch;

use super::{Held, Rate, RateKind, Request, SlotLease};
use crate::error::Result;
use crate::fetch::FetchShared;
use crate::link::connection::Conn;

/// A concurrency limit below this is checked job by job: with few slots, parking some in a process
/// would cost the others' deferred jobs their turn.
pub const MIN_SLOTS_CAP: u64 = 16;
/// At most this many slots in one lease.
pub const MAX_SLOTS: u64 = 32;
/// A rate limit allowing fewer starts than this per `per` is checked job by job.
pub const MIN_TOKENS_COUNT: u64 = 100;
/// Rate tokens in the first lease of a limit, and the bounds of its size.
const FIRST_TOKENS: u64 = 8;
const MAX_TOKENS: u64 = 65536;
/// How long leased tokens may be spent after they were asked for.
pub const TOKENS_VALID: Duration = Duration::from_millis(100);
/// How often the keeper looks at the leased slots.
pub const KEEP_EVERY: Duration = Duration::from_millis(50);
/// Leased slots unused for this long go back.
pub const IDLE_AFTER: Duration = Duration::from_millis(200);
/// While a leased limit is contended, reservations older than this are dropped by the keeper: a
/// resumed job that ran on a leased slot left its reservation behind (the pump's own lifetime,
/// [`super::RESERVATION_MS`], is for limits checked job by job).
pub const LEASED_RESERVATION_MS: u64 = 2_000;

static LEASE: LazyLock<Script> = LazyLock::new(|| Script::new(with_lib!("limit_lease.lua")));

/// A lease of one concurrency limit's slots.
#[derive(Debug)]
struct Slots {
    /// The limit's key, as the map holds it: a held slot shares it.
    key: Arc<str>,
    cap: u64,
    free: Vec<String>,
    used: usize,
    /// Jobs of the limit wait (as the keeper last saw): no leased slot is taken or kept. Shared
    /// with the slots taken ([`SlotLease`]), which a fetcher keeps from one job to the next
    /// without this lock while it reads false. Written under the lock.
    contended: Arc<AtomicBool>,
    last_take: Instant,
}

impl Slots {
    fn contended(&self) -> bool {
        self.contended.load(Ordering::Relaxed)
    }
}

/// Leased tokens of one rate limit.
#[derive(Debug)]
struct Tokens {
    /// The limit's key, as the map holds it: a fetcher's [`TokenBatch`] shares it.
    key: Arc<str>,
    kind: RateKind,
    count: u64,
    per: f64,
    left: u64,
    until: Instant,
    /// The size of the next lease.
    next: u64,
}

/// The leases by limit key, looked up with the GVL held whenever a thread takes a slot or a batch
/// of tokens, so the maps hash with foldhash (seeded per map) rather than SipHash: ~4× fewer
/// instructions a lookup on short keys. The keys are the app's limit names, and the `Class[key]` of a keyed limit.
#[derive(Debug, Default)]
struct State {
    slots: HashMap<Arc<str>, Slots, FoldState>,
    tokens: HashMap<Arc<str>, Tokens, FoldState>,
}

/// Numbers of leased slots' fields and token leases, unique within the process (its capsules
/// share the identity).
static SEQ: AtomicU64 = AtomicU64::new(0);

/// What a process leased, shared by its threads (one per capsule: `FetchShared::leases`).
#[derive(Debug, Default)]
pub struct Leases {
    state: Mutex<State>,
}

/// What a job asks `limit_acquire.lua` to lease along with its own check.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Ask {
    pub slots: u64,
    pub first: u64,
    pub tokens: u64,
    pub name: String,
}

/// Tokens of one rate limit's lease that a fetcher took for its next jobs, spent without the
/// leases' lock until `until`, as the lease's own. What is left then is dropped with the lease.
#[derive(Debug)]
pub struct TokenBatch {
    key: Arc<str>,
    left: u64,
    until: Instant,
}

impl TokenBatch {
    /// Spends one token of the limit `rkey`, if this batch is that limit's and holds one still
    /// valid at `now`.
    pub fn spend(&mut self, rkey: &str, now: Instant) -> bool {
        if self.left == 0 || now >= self.until || &*self.key != rkey {
            return false;
        }
        self.left -= 1;
        true
    }
}

/// The most tokens a fetcher takes from a lease at once ([`Leases::take_tokens`] takes an eighth of
/// what the lease holds, so that the process's threads share it).
const TOKEN_BATCH: u64 = 64;

fn lock(m: &Mutex<State>) -> MutexGuard<'_, State> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Tokens {
    fn fits(&self, r: &Rate) -> bool {
        self.kind == r.kind && self.count == r.count && self.per == r.per
    }
}

impl Leases {
    /// The field prefix of this process's leased slots.
    pub fn field_prefix(identity: &str) -> String {
        format!("L:{identity}:")
    }

    /// A leased slot of the concurrency limit `lkey` (of `cap`), taken in memory at `now`: `None`
    /// when the lease has none free, is contended or is for another cap.
    pub fn take_slot(&self, lkey: &str, cap: u64, now: Instant) -> Option<Held> {
        let mut st = lock(&self.state);
        let s = st.slots.get_mut(lkey)?;
        if s.contended() || s.cap != cap {
            return None;
        }
        let field = s.free.pop()?;
        s.used += 1;
        s.last_take = now;
        Some(Held {
            lkey: Arc::clone(&s.key),
            jid: field,
            lease: Some(SlotLease {
                cap: s.cap,
                contended: Arc::clone(&s.contended),
            }),
        })
    }

    /// Up to [`TOKEN_BATCH`] tokens of the rate limit `rkey`'s lease for a fetcher's next jobs
    /// (an eighth of what the lease holds, at least one): `None` when it has none valid at `now`.
    /// A token lease is only ever replaced by one of the rate's current parameters, so the key
    /// alone names it.
    pub fn take_tokens(&self, rkey: &str, now: Instant) -> Option<TokenBatch> {
        let mut st = lock(&self.state);
        let t = st.tokens.get_mut(rkey)?;
        if t.left == 0 || now >= t.until {
            return None;
        }
        let n = (t.left / 8).clamp(1, TOKEN_BATCH);
        t.left -= n;
        Some(TokenBatch {
            key: Arc::clone(&t.key),
            left: n,
            until: t.until,
        })
    }

    /// A fetcher's token batch it no longer spends (it moves to another limit, or closes): what is
    /// left goes back to its lease, if that lease is still the one it came from.
    pub fn return_tokens(&self, batch: TokenBatch) {
        if batch.left == 0 {
            return;
        }
        let mut st = lock(&self.state);
        if let Some(t) = st.tokens.get_mut(&*batch.key) {
            if t.until == batch.until {
                t.left += batch.left;
            }
        }
    }

    /// A leased slot whose job settled (or that a fetcher kept and no longer needs): back in the
    /// lease's pool for the next job (`None`), or handed back (`Some`) to be given back through
    /// Redis, since jobs of its limit wait or the lease is gone.
    pub fn give(&self, held: Held) -> Option<Held> {
        let mut st = lock(&self.state);
        let Some(s) = st.slots.get_mut(&*held.lkey) else {
            return Some(held);
        };
        s.used = s.used.saturating_sub(1);
        if s.contended() {
            return Some(held);
        }
        s.free.push(held.jid);
        None
    }

    /// What to ask for along with a job's check (`threads`: the process's).
    pub fn ask(&self, req: &Request, threads: usize) -> Ask {
        let st = lock(&self.state);
        let slots = match &req.concurrency {
            Some((lkey, cap)) if *cap >= MIN_SLOTS_CAP => {
                let lease = st.slots.get(lkey.as_str());
                let busy = lease.is_some_and(|s| s.contended() || s.cap != *cap);
                let has = lease.map_or(0, |s| s.free.len() + s.used);
                if busy || has >= threads {
                    0
                } else {
                    ((threads - has) as u64).min(MAX_SLOTS).min(cap / 4)
                }
            }
            _ => 0,
        };
        let tokens = match &req.rate {
            Some(r) if r.count >= MIN_TOKENS_COUNT => {
                let t = st.tokens.get(r.key.as_str()).filter(|t| t.fits(r));
                if t.is_some_and(|t| t.left > 0 && Instant::now() < t.until) {
                    0 // tokens left: the job is here for a slot
                } else {
                    t.map_or(FIRST_TOKENS, |t| t.next).min(r.count / 8)
                }
            }
            _ => 0,
        };
        drop(st);
        let first = if slots > 0 {
            SEQ.fetch_add(slots, Ordering::Relaxed)
        } else {
            0
        };
        let name = if tokens > 1 {
            format!("{}", SEQ.fetch_add(1, Ordering::Relaxed))
        } else {
            String::new()
        };
        Ask {
            slots,
            first,
            tokens,
            name,
        }
    }

    /// Records what `limit_acquire.lua` granted for `req` (asked at `asked`).
    pub fn granted(
        &self,
        req: &Request,
        identity: &str,
        ask: &Ask,
        slots: u64,
        tokens: u64,
        asked: Instant,
    ) {
        let mut st = lock(&self.state);
        if let (Some((lkey, cap)), true) = (&req.concurrency, slots > 0) {
            let prefix = Leases::field_prefix(identity);
            let key: Arc<str> = Arc::from(lkey.as_str());
            let s = st.slots.entry(Arc::clone(&key)).or_insert_with(|| Slots {
                key,
                cap: *cap,
                free: Vec::new(),
                used: 0,
                contended: Arc::new(AtomicBool::new(false)),
                last_take: asked,
            });
            s.cap = *cap;
            s.last_take = asked;
            s.free
                .extend((ask.first..ask.first + slots).map(|n| format!("{prefix}{n}")));
        }
        if let Some(r) = &req.rate {
            if ask.tokens == 0 {
                return;
            }
            let prior = st.tokens.get(r.key.as_str()).filter(|t| t.fits(r));
            // Doubled when the last lease ran out before its end, halved when tokens were dropped;
            // a lease refused (no tokens granted) keeps the size it asked for.
            let next = match prior {
                None => FIRST_TOKENS,
                Some(t) if tokens == 0 => t.next,
                Some(t) if t.left == 0 => (t.next * 2).min(MAX_TOKENS),
                Some(t) if Instant::now() >= t.until => (t.next / 2).max(2),
                Some(t) => t.next,
            };
            let key: Arc<str> = Arc::from(r.key.as_str());
            st.tokens.insert(
                Arc::clone(&key),
                Tokens {
                    key,
                    kind: r.kind,
                    count: r.count,
                    per: r.per,
                    left: tokens,
                    until: asked + TOKENS_VALID,
                    next,
                },
            );
        }
    }

    /// A job of `lkey` was deferred: the process takes no leased slot of it until the keeper finds
    /// nothing waiting.
    pub fn contended(&self, lkey: &str) {
        if let Some(s) = lock(&self.state).slots.get_mut(lkey) {
            s.contended.store(true, Ordering::Relaxed);
        }
    }

    /// For the keeper: each leased limit, and whether it went idle here.
    fn leased(&self, now: Instant) -> Vec<(Arc<str>, bool)> {
        let mut st = lock(&self.state);
        // Kept while contended even with nothing leased: the keeper still drops the reservations a
        // resumed job left behind by running on a leased slot.
        st.slots
            .retain(|_, s| !(s.free.is_empty() && s.used == 0 && !s.contended()));
        st.slots
            .iter()
            .map(|(lkey, s)| {
                (
                    Arc::clone(lkey),
                    now.duration_since(s.last_take) >= IDLE_AFTER,
                )
            })
            .collect()
    }

    /// Marks `lkey` contended or not; when contended, its unused slots leave the lease (to be given
    /// back by the caller).
    fn set_contended(&self, lkey: &str, contended: bool) -> Vec<String> {
        let mut st = lock(&self.state);
        match st.slots.get_mut(lkey) {
            Some(s) => {
                s.contended.store(contended, Ordering::Relaxed);
                if contended {
                    std::mem::take(&mut s.free)
                } else {
                    Vec::new()
                }
            }
            None => Vec::new(),
        }
    }

    /// Takes `lkey`'s unused slots out of the lease (to be given back by the caller).
    fn take_free(&self, lkey: &str) -> Vec<String> {
        let mut st = lock(&self.state);
        st.slots
            .get_mut(lkey)
            .map(|s| std::mem::take(&mut s.free))
            .unwrap_or_default()
    }

    /// Slots leased now (held, free or in use), for tests.
    pub fn slots_leased(&self, lkey: &str) -> usize {
        lock(&self.state)
            .slots
            .get(lkey)
            .map_or(0, |s| s.free.len() + s.used)
    }
}

/// One keeper turn for `leases`: per leased limit, one `limit_lease.lua` call that asks whether
/// jobs wait, and one more that gives the unused slots back if they do or the limit went idle here.
/// Slots given back are gone from the lease first, so a failed call only leaves them in Redis until
/// the process is recovered or stops.
pub async fn keep_turn(conn: &mut Conn, identity: &str, leases: &Leases) -> Result<()> {
    let prefix = conn.keys().namespace().to_owned();
    for (lkey, idle) in leases.leased(Instant::now()) {
        let call = |force: bool, fields: &[String]| {
            let mut inv = LEASE.prepare_invoke();
            inv.arg(&prefix)
                .arg(identity)
                .arg(&*lkey)
                .arg(if force { "1" } else { "0" })
                .arg(LEASED_RESERVATION_MS);
            for f in fields {
                inv.arg(f);
            }
            inv
        };
        let (_, contended) = conn.script::<(i64, i64)>(&call(false, &[])).await?;
        let mut fields = leases.set_contended(&lkey, contended > 0);
        if idle {
            fields.extend(leases.take_free(&lkey));
        }
        if !fields.is_empty() {
            conn.script::<(i64, i64)>(&call(true, &fields)).await?;
        }
    }
    Ok(())
}

/// The lease keeper of a server process: every [`KEEP_EVERY`], gives leased slots back where jobs
/// wait or the class went idle. Costs nothing while nothing is leased.
pub async fn keep(mut conn: Conn, all: Vec<Arc<FetchShared>>, mut stop: watch::Receiver<bool>) {
    let mut every = tokio::time::interval(KEEP_EVERY);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = stop.changed() => return,
            _ = every.tick() => {
                for capsule in &all {
                    if let Err(e) = keep_turn(&mut conn, &capsule.identity, &capsule.leases).await {
                        tracing::warn!(error = %e, "giving back leased concurrency slots failed; tried again");
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(cap: u64, rate: Option<u64>) -> Request {
        Request {
            class: "W".into(),
            jid: "j".into(),
            concurrency: Some(("W".into(), cap)),
            rate: rate.map(|count| Rate {
                key: "W".into(),
                kind: RateKind::Window,
                count,
                per: 1.0,
            }),
        }
    }

    #[test]
    fn small_limits_are_never_leased() {
        let l = Leases::default();
        assert_eq!(l.ask(&req(MIN_SLOTS_CAP - 1, Some(50)), 10).slots, 0);
        assert_eq!(l.ask(&req(MIN_SLOTS_CAP - 1, Some(50)), 10).tokens, 0);
        assert!(l.take_slot("W", 2, Instant::now()).is_none());
    }

    #[test]
    fn leased_slots_and_tokens_are_taken_and_given_in_memory() {
        let l = Leases::default();
        let r = req(1000, Some(1_000_000));
        let ask = l.ask(&r, 4);
        assert_eq!((ask.slots, ask.tokens), (4, FIRST_TOKENS));
        let now = Instant::now();
        l.granted(&r, "id", &ask, 4, 2, now);
        let a = l.take_slot("W", 1000, now).expect("a leased slot");
        assert!(a.lease.is_some() && a.jid.starts_with("L:id:"));
        let mut tokens = l.take_tokens("W", now).expect("tokens");
        assert!(tokens.spend("W", now));
        assert!(
            l.take_tokens("W", now).is_some(),
            "one at a time from a lease of two"
        );
        assert!(l.take_tokens("W", now).is_none(), "two tokens only");
        assert_eq!(l.give(a.clone()), None);
        assert_eq!(l.slots_leased("W"), 4);
        l.contended("W");
        assert!(a.lease.as_ref().is_some_and(SlotLease::contended));
        assert!(l.take_slot("W", 1000, now).is_none());
        assert_eq!(
            l.give(a.clone()),
            Some(a),
            "given back through Redis while jobs wait"
        );
    }

    #[test]
    fn a_fetcher_spends_a_batch_of_tokens_and_gives_back_what_it_did_not() {
        let l = Leases::default();
        let r = req(1000, Some(1_000_000));
        let ask = l.ask(&r, 4);
        l.granted(&r, "id", &ask, 0, 80, Instant::now());
        let now = Instant::now();
        let mut batch = l.take_tokens("W", now).expect("a batch");
        assert_eq!(batch.left, 10, "an eighth of the lease");
        assert!(!batch.spend("Other", now), "another limit's tokens");
        assert!(batch.spend("W", now));
        assert!(
            !batch.spend("W", now + TOKENS_VALID),
            "spent only while the lease is valid"
        );
        l.return_tokens(batch);
        let again = l.take_tokens("W", now).expect("a batch");
        assert_eq!(again.left, 79 / 8, "79 left in the lease");
        let lease_end = again.until;
        let renewal = Ask {
            tokens: 80,
            ..Ask::default()
        };
        let later = now + Duration::from_millis(1);
        l.granted(&r, "id", &renewal, 0, 80, later);
        assert_ne!(l.take_tokens("W", now).expect("a batch").until, lease_end);
        let before = lock(&l.state).tokens.get("W").map(|t| t.left);
        l.return_tokens(again);
        assert_eq!(
            lock(&l.state).tokens.get("W").map(|t| t.left),
            before,
            "a replaced lease takes no tokens back"
        );
    }

    #[test]
    fn a_changed_limit_ignores_the_lease() {
        let l = Leases::default();
        let r = req(1000, None);
        let ask = l.ask(&r, 2);
        let now = Instant::now();
        l.granted(&r, "id", &ask, 2, 0, now);
        assert!(l.take_slot("W", 500, now).is_none());
        assert!(l.take_slot("W", 1000, now).is_some());
    }
}
