//! Recovery of jobs stranded by gitlab-sidekiq-fetcher 0.8 (GitLab's reliable fetch for Sidekiq).
//!
//! A Sidekiq process running that fetcher moves each job it takes into
//! `working:queue:<name>:<hostname>:<pid>:<nonce>` (or the older `…:<hostname>:<pid>`) and keeps
//! `reliable-fetcher-heartbeat-<identity>` alive (`SET … EX 60` every 20 s). When it is killed, its
//! running jobs stay in those lists; the fetcher's own cleaner (one process an hour, holding
//! `reliable-fetcher-cleanup-lock`) would put back the lists whose heartbeat has expired. A GitLab
//! app moving to our server has no such cleaner left, so our servers do it (WIRE.md §6):
//!
//! - **Finding the lists** takes a `SCAN MATCH working:queue:*` over the keyspace, so it runs only
//!   every `every` (60 s by default) and by one server at a time: the one that takes our lease
//!   (`jq:gitlab-fetch:scan`, `SET NX EX`, a second shorter than `every`), the first time at start.
//! - **Watching them** is cheap: the lists found stay watched by the server that found them, which
//!   checks their owners' heartbeats (one `EXISTS` per owner, pipelined) on each of its turns
//!   ([`TURN`]). A list found before its owner died is thus back in its queue within a turn of the
//!   heartbeat's expiry (≤ 60 s after the death); one that appeared since the last scan, within a
//!   scan interval more.
//! - **Moving a list** is `gitlab_requeue.lua`: one list per call, which re-checks the heartbeat in
//!   the same atomic step and moves every job to the right of its queue, so they run next. The
//!   fetcher's cleaner, if a Sidekiq process still runs it, pops the same lists job by job: each job
//!   goes back once, by whichever takes it. We do not wait for its cleanup lock, which it holds for
//!   an hour after each cleanup: it paces that cleaner, and guards nothing we rely on.
//!
//! Unlike the fetcher's cleaner, the jobs go back as they were: no `interrupted_count` is added and
//! none goes to the `interrupted` set (our own crash recovery counts nothing either).

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use redis::Value as RedisValue;
use tokio::sync::watch;

use crate::error::Result;
use crate::keys::Keys;
use crate::link::connection::Conn;
use crate::scripts;

/// How often a server checks the heartbeats of the lists it watches (and whether a scan is due).
pub const TURN: Duration = Duration::from_secs(3);
/// The default scan interval: the fetcher's heartbeat lifespan, so a list is found within about the
/// time its owner's death takes to show. (The fetcher's own cleaner runs at most once an hour.)
pub const DEFAULT_EVERY: Duration = Duration::from_secs(60);
/// Keys a `SCAN` call looks at (as the fetcher's cleaner scans).
const SCAN_COUNT: usize = 1000;

/// A working list of gitlab-sidekiq-fetcher: whose it is and where its jobs go back to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkingList {
    /// The list's key, namespace included.
    pub key: String,
    /// The queue name (`default`, or `mail:high` for a queue name with colons).
    pub queue: String,
    /// The owner's identity, `<hostname>:<pid>:<nonce>` (or the older `<hostname>:<pid>`).
    pub identity: String,
}

/// Reads a key (namespace removed) as the fetcher's cleaner does: `working:queue:<name>:<identity>`
/// where the identity is `<hostname>:<digits>:<hex>`, or failing that `<hostname>:<digits>`; the
/// hostname holds no `:`, the queue name may. `None` for anything else.
pub fn parse_working_key(key: &str) -> Option<(String, String)> {
    let rest = key.strip_prefix("working:queue:")?;
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    let hex = |s: &str| s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
    let split = |parts: usize| -> Option<(String, String)> {
        let mut at = rest.len();
        for _ in 0..parts {
            at = rest[..at].rfind(':')?;
        }
        let (queue, identity) = (&rest[..at], &rest[at + 1..]);
        (!queue.is_empty()).then(|| (queue.to_owned(), identity.to_owned()))
    };
    if let Some((queue, identity)) = split(3) {
        let mut parts = identity.split(':');
        let (_host, pid, nonce) = (parts.next()?, parts.next()?, parts.next()?);
        if digits(pid) && hex(nonce) {
            return Some((queue, identity));
        }
    }
    let (queue, identity) = split(2)?;
    let (_host, pid) = identity.split_once(':')?;
    digits(pid).then_some((queue, identity))
}

/// One full `SCAN` for the fetcher's working lists under `keys`' namespace.
pub async fn scan(conn: &mut Conn) -> Result<Vec<WorkingList>> {
    let keys = conn.keys().clone();
    let pattern = keys.gitlab_working_pattern();
    let mut found = Vec::new();
    let mut cursor = "0".to_owned();
    loop {
        let (next, batch): (String, Vec<RedisValue>) =
            conn.scan(&cursor, &pattern, SCAN_COUNT).await?;
        for value in batch {
            let RedisValue::BulkString(bytes) = value else {
                continue;
            };
            let Ok(key) = String::from_utf8(bytes) else {
                continue;
            };
            let Some(bare) = key.strip_prefix(keys.namespace()) else {
                continue;
            };
            if let Some((queue, identity)) = parse_working_key(bare) {
                found.push(WorkingList {
                    key,
                    queue,
                    identity,
                });
            }
        }
        if next == "0" {
            return Ok(found);
        }
        cursor = next;
    }
}

/// Moves `list` back to its queue if its owner's heartbeat has expired. `None` if the owner is
/// alive, else how many jobs moved.
pub async fn requeue_if_dead(conn: &mut Conn, list: &WorkingList) -> Result<Option<usize>> {
    let keys = conn.keys().clone();
    let mut inv = scripts::GITLAB_REQUEUE.prepare_invoke();
    inv.key(&list.key)
        .key(keys.gitlab_heartbeat(&list.identity))
        .key(keys.queue(&list.queue))
        .key(keys.queues())
        .arg(&list.queue);
    let moved: i64 = conn.script(&inv).await?;
    Ok(usize::try_from(moved).ok())
}

/// The lists one server watches and when it scans next.
#[derive(Debug)]
pub struct Recovery {
    identity: String,
    every: Duration,
    next_scan: tokio::time::Instant,
    watched: BTreeMap<String, WorkingList>,
}

impl Recovery {
    /// `identity`: this server's (the lease's value); `every`: the scan interval.
    pub fn new(identity: &str, every: Duration) -> Recovery {
        Recovery {
            identity: identity.to_owned(),
            every: every.max(Duration::from_secs(1)),
            next_scan: tokio::time::Instant::now(),
            watched: BTreeMap::new(),
        }
    }

    /// The lists watched now.
    pub fn watched(&self) -> impl Iterator<Item = &WorkingList> {
        self.watched.values()
    }

    /// One turn: scans if a scan is due and this server takes the lease, then puts back every
    /// watched list whose owner is dead. Returns how many jobs went back.
    pub async fn turn(&mut self, conn: &mut Conn) -> Result<usize> {
        let now = tokio::time::Instant::now();
        if now >= self.next_scan {
            self.next_scan = now + self.every;
            if self.take_lease(conn).await? {
                let found = scan(conn).await?;
                tracing::debug!(
                    lists = found.len(),
                    "scanned for gitlab-sidekiq-fetcher's working lists"
                );
                self.watched = found.into_iter().map(|l| (l.key.clone(), l)).collect();
            }
        }
        if self.watched.is_empty() {
            return Ok(0);
        }
        let dead = self.dead_owners(conn).await?;
        let mut moved = 0;
        let lists: Vec<WorkingList> = self
            .watched
            .values()
            .filter(|l| dead.contains(&l.identity))
            .cloned()
            .collect();
        for list in lists {
            if let Some(n) = requeue_if_dead(conn, &list).await? {
                self.watched.remove(&list.key);
                moved += n;
                if n > 0 {
                    tracing::warn!(
                        process = %list.identity,
                        queue = %list.queue,
                        jobs = n,
                        "a gitlab-sidekiq-fetcher process stopped beating; its unfinished jobs are back in their queue"
                    );
                }
            }
        }
        Ok(moved)
    }

    async fn take_lease(&self, conn: &mut Conn) -> Result<bool> {
        let key = conn.keys().gitlab_scan_lease();
        let taken: Option<String> = conn
            .cmd(
                redis::cmd("SET")
                    .arg(&key)
                    .arg(&self.identity)
                    .arg("NX")
                    .arg("EX")
                    .arg(lease_secs(self.every)),
            )
            .await?;
        Ok(taken.is_some())
    }

    /// The owners of watched lists whose heartbeat is gone (one pipelined `EXISTS` per owner).
    async fn dead_owners(&self, conn: &mut Conn) -> Result<BTreeSet<String>> {
        let keys: Keys = conn.keys().clone();
        let owners: Vec<&str> = self
            .watched
            .values()
            .map(|l| l.identity.as_str())
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        let mut pipe = redis::pipe();
        for owner in &owners {
            pipe.cmd("EXISTS").arg(keys.gitlab_heartbeat(owner));
        }
        let alive: Vec<i64> = conn.pipe(&pipe).await?;
        Ok(owners
            .into_iter()
            .zip(alive)
            .filter(|(_, a)| *a == 0)
            .map(|(o, _)| o.to_owned())
            .collect())
    }
}

/// How long a scan's lease lasts: a second less than the interval, so the holder's next scan, an
/// interval later, finds it expired rather than racing its expiry (and skipping an interval).
fn lease_secs(every: Duration) -> u64 {
    every.as_secs().saturating_sub(1).max(1)
}

/// Runs [`Recovery::turn`] every [`TURN`] until stopped, the first at once.
pub async fn run(mut conn: Conn, mut recovery: Recovery, mut stop: watch::Receiver<bool>) {
    loop {
        if let Err(e) = recovery.turn(&mut conn).await {
            tracing::warn!(error = %e, "gitlab-sidekiq-fetcher recovery failed; tried again next turn");
        }
        tokio::select! {
            _ = stop.changed() => return,
            _ = tokio::time::sleep(TURN) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(key: &str) -> Option<(&'static str, &'static str)> {
        parse_working_key(key).map(|(q, i)| (&*q.leak(), &*i.leak()))
    }

    #[test]
    fn keys_as_the_fetcher_writes_them() {
        assert_eq!(
            parsed("working:queue:default:web-1:4242:0a1b2c3d4e5f"),
            Some(("default", "web-1:4242:0a1b2c3d4e5f"))
        );
        // A queue name with colons (a namespaced queue) keeps them.
        assert_eq!(
            parsed("working:queue:mail:high:web-1:4242:0a1b2c3d4e5f"),
            Some(("mail:high", "web-1:4242:0a1b2c3d4e5f"))
        );
        // The identity before 0.5: hostname and pid.
        assert_eq!(
            parsed("working:queue:default:web-1:4242"),
            Some(("default", "web-1:4242"))
        );
        assert_eq!(
            parsed("working:queue:mail:high:web-1:4242"),
            Some(("mail:high", "web-1:4242"))
        );
    }

    #[test]
    fn other_keys_are_not_working_lists() {
        assert_eq!(parsed("working:queue:default"), None);
        assert_eq!(parsed("working:queue:default:web-1:pid"), None);
        assert_eq!(parsed("working:queue::web-1:4242:abc"), None);
        assert_eq!(parsed("jq:working:h:1:abc:3:default"), None);
        assert_eq!(parsed("queue:default"), None);
        // A nonce that is not lower-case hex makes the last two parts a legacy identity.
        assert_eq!(parsed("working:queue:default:web-1:4242:XYZ"), None);
    }

    #[test]
    fn the_lease_ends_before_the_next_scan() {
        assert_eq!(lease_secs(Duration::from_secs(60)), 59);
        assert_eq!(lease_secs(Duration::from_secs(1)), 1);
    }

    #[test]
    fn heartbeat_and_pattern_follow_the_namespace() {
        let k = Keys::new("resque:gitlab:");
        assert_eq!(
            k.gitlab_heartbeat("web-1:4242:0a1b"),
            "resque:gitlab:reliable-fetcher-heartbeat-web-1-4242-0a1b"
        );
        assert_eq!(k.gitlab_working_pattern(), "resque:gitlab:working:queue:*");
        assert_eq!(
            Keys::new("a*[b]:").gitlab_working_pattern(),
            "a\\*\\[b\\]:working:queue:*"
        );
    }
}
