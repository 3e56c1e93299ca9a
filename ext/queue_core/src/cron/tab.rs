//! The scheduler leader's cron turn: an in-process index of every schedule's next tick, and the
//! pushes of the ticks that came due.
//!
//! Cost per second in Redis is O(schedules due), not O(all schedules): the index answers "is
//! anything due?" with no Redis call at all, and the schedules are read from Redis only
//!
//! - when the index is built (the first turn as leader),
//! - when a cheap check, at most once a second, sees a change: one pipeline of `GET jq:cron:changes`
//!   (bumped by our API on every save, enable, disable and destroy) and `SCARD cron_jobs` (so a
//!   schedule that sidekiq-cron's own API creates or destroys is seen within a second too),
//! - and every [`REFRESH`] regardless, for what neither shows: a cron string rewritten in place by
//!   sidekiq-cron's API.
//!
//! A refresh is `SMEMBERS cron_jobs` and one pipeline of `HGET cron` per schedule. Enabling and
//! disabling need no refresh: the push script reads `status` as it claims the tick, so a schedule
//! disabled by either API is not pushed from that moment.
//!
//! A due schedule costs one pipeline that reads its hash fields (shared by every schedule due in that
//! turn) and one script call (`cron_enqueue.lua`) that claims the tick and pushes.
//!
//! Missed ticks are skipped, as sidekiq-cron skips them: a tick is pushed only within [`WINDOW`] of
//! its time, so after downtime a schedule runs at its next tick, not once per tick it missed. A
//! schedule whose hash has `catch_up` set (a field sidekiq-cron ignores) is pushed for its latest
//! missed tick instead, once: when the index is built, its next tick is its latest one however old,
//! and the claim in `:enqueued` and `last_enqueue_time` keep a tick that did run from running again.
//! That costs one read per catch-up schedule when the index is built, none after.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use crate::clock::float_string;
use crate::cron::job::{self, FIELDS, LAST_ENQUEUE_TIME};
use crate::cron::schedule::Schedule;
use crate::error::Result;
use crate::link::connection::Conn;
use crate::scripts;

/// Every schedule is read again at least this often.
pub const REFRESH: Duration = Duration::from_secs(30);
/// The change check runs at most this often.
pub const CHECK: Duration = Duration::from_secs(1);
/// A tick is pushed only this long after its time (sidekiq-cron's 60 s): older ones were missed.
pub const WINDOW: i64 = 60;
/// Ticks recorded in `:enqueued` are forgotten after a day (sidekiq-cron's `REMEMBER_THRESHOLD`).
pub const REMEMBER: i64 = 24 * 60 * 60;
/// Entries kept in `:jid_history` (sidekiq-cron's default `cron_history_size`).
pub const HISTORY: i64 = 10;
/// The hash field that asks for the latest missed tick to be pushed after downtime (ours; sidekiq-cron
/// neither reads nor removes it).
pub const CATCH_UP: &str = "catch_up";

#[derive(Debug)]
struct Entry {
    cron: String,
    /// Whether the schedule catches up its latest missed tick.
    catch_up: bool,
    schedule: Schedule,
    /// The tick to push next (epoch seconds).
    next: i64,
}

/// One process's index of the schedules, kept while it leads.
#[derive(Debug, Default)]
pub struct Crontab {
    entries: HashMap<String, Entry>,
    /// The earliest `next` of all entries.
    earliest: Option<i64>,
    /// When the index was last read from Redis, and the change marks seen then.
    refreshed: Option<Instant>,
    checked: Option<Instant>,
    marks: Option<(Option<String>, i64)>,
    /// Schedules whose cron string could not be parsed, with the string, so each is logged once.
    broken: HashMap<String, String>,
}

/// What one turn did, for tests and logs.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct TurnReport {
    pub refreshed: bool,
    pub pushed: usize,
}

impl Crontab {
    pub fn new() -> Self {
        Self::default()
    }

    /// How many schedules the index holds.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Forgets the index (this process stopped leading): the next leader turn reads it again.
    pub fn forget(&mut self) {
        *self = Crontab {
            broken: std::mem::take(&mut self.broken),
            ..Crontab::default()
        };
    }

    /// The leader's cron turn at `now` (epoch seconds).
    pub async fn turn(&mut self, conn: &mut Conn, now: f64) -> Result<TurnReport> {
        let mut report = TurnReport::default();
        if self.must_refresh(conn).await? {
            self.refresh(conn, now).await?;
            report.refreshed = true;
        }
        let second = now.floor() as i64;
        if self.earliest.is_some_and(|e| e <= second) {
            report.pushed = self.push_due(conn, now).await?;
        }
        Ok(report)
    }

    async fn must_refresh(&mut self, conn: &mut Conn) -> Result<bool> {
        let due = |at: Option<Instant>, every: Duration| at.is_none_or(|t| t.elapsed() >= every);
        if due(self.refreshed, REFRESH) {
            return Ok(true);
        }
        if !due(self.checked, CHECK) {
            return Ok(false);
        }
        self.checked = Some(Instant::now());
        let marks = read_marks(conn).await?;
        Ok(self.marks.as_ref() != Some(&marks))
    }

    async fn refresh(&mut self, conn: &mut Conn, now: f64) -> Result<()> {
        let keys = conn.keys().clone();
        let marks = read_marks(conn).await?;
        let members: Vec<String> = conn
            .cmd(redis::cmd("SMEMBERS").arg(keys.cron_jobs()))
            .await?;
        // sidekiq-cron keys a schedule's hash by its name (`cron_job:<name>`), so the member names it.
        let members: Vec<String> = members
            .into_iter()
            .filter(|m| m.starts_with("cron_job:"))
            .collect();
        let mut pipe = redis::pipe();
        for member in &members {
            pipe.cmd("HMGET")
                .arg(keys.cron_job(member))
                .arg("cron")
                .arg(CATCH_UP);
        }
        let rows: Vec<(Option<String>, Option<String>)> = if members.is_empty() {
            Vec::new()
        } else {
            conn.pipe(&pipe).await?
        };
        let second = now.floor() as i64;
        let mut entries = HashMap::with_capacity(rows.len());
        for (member, (cron, catch_up)) in members.iter().zip(rows) {
            let name = member["cron_job:".len()..].to_owned();
            let Some(cron) = cron else { continue };
            let catch_up = job::flag(catch_up.as_deref());
            let old = self
                .entries
                .remove(&name)
                .filter(|e| e.cron == cron && e.catch_up == catch_up);
            let entry = match old {
                Some(e) => e,
                None => match Schedule::parse(&name, &cron) {
                    Ok(schedule) => {
                        self.broken.remove(&name);
                        // A tick within the window that nobody claimed yet is still pushed (the
                        // claim in Redis decides); sidekiq-cron's save claims the current one. A
                        // catch-up schedule's latest tick is tried however old.
                        let next = schedule
                            .tick_at_or_before(second)
                            .filter(|t| catch_up || second - t <= WINDOW)
                            .or_else(|| schedule.tick_after(second));
                        let Some(next) = next else { continue };
                        Entry {
                            cron,
                            catch_up,
                            schedule,
                            next,
                        }
                    }
                    Err(e) => {
                        if self.broken.get(&name) != Some(&cron) {
                            tracing::warn!(error = %e, "cron schedule skipped");
                            self.broken.insert(name.clone(), cron);
                        }
                        continue;
                    }
                },
            };
            entries.insert(name, entry);
        }
        self.entries = entries;
        self.earliest = self.entries.values().map(|e| e.next).min();
        self.refreshed = Some(Instant::now());
        self.checked = self.refreshed;
        self.marks = Some(marks);
        Ok(())
    }

    async fn push_due(&mut self, conn: &mut Conn, now: f64) -> Result<usize> {
        let keys = conn.keys().clone();
        let second = now.floor() as i64;
        let mut due: Vec<(String, i64)> = Vec::new();
        for (name, entry) in &mut self.entries {
            if entry.next > second {
                continue;
            }
            // The latest tick now: after a stall, the one missed ticks lead to.
            let tick = entry
                .schedule
                .tick_at_or_before(second)
                .unwrap_or(entry.next);
            if second - tick <= WINDOW || entry.catch_up {
                due.push((name.clone(), tick));
            } else {
                tracing::info!(schedule = %name, tick, "cron tick missed; skipped");
                if let Some(next) = entry.schedule.tick_after(second) {
                    entry.next = next;
                }
            }
        }
        let mut pushed = 0;
        if !due.is_empty() {
            let mut pipe = redis::pipe();
            for (name, _) in &due {
                let cmd = pipe
                    .cmd("HMGET")
                    .arg(keys.cron_job(&format!("cron_job:{name}")));
                for f in FIELDS {
                    cmd.arg(f);
                }
            }
            let rows: Vec<Vec<Option<String>>> = conn.pipe(&pipe).await?;
            for ((name, tick), fields) in due.iter().zip(rows) {
                // sidekiq-cron's `not_enqueued_after?`: a tick no later than the last enqueue is not
                // pushed (a cron string changed to one whose latest tick is older than that).
                let last = fields
                    .get(LAST_ENQUEUE_TIME)
                    .and_then(|v| v.as_deref())
                    .and_then(parse_last_enqueue_time);
                let pushing = if last.is_some_and(|last| last >= *tick) {
                    Ok(false)
                } else {
                    push_tick(conn, name, *tick, &fields, now).await
                };
                match pushing {
                    Ok(true) => pushed += 1,
                    Ok(false) => {}
                    Err(e @ crate::Error::InvalidJob(_)) => {
                        tracing::warn!(error = %e, "cron schedule cannot be pushed")
                    }
                    Err(e) => return Err(e),
                }
                if let Some(entry) = self.entries.get_mut(name) {
                    if let Some(next) = entry.schedule.tick_after(second) {
                        entry.next = next;
                    } else {
                        self.entries.remove(name);
                    }
                }
            }
        }
        self.earliest = self.entries.values().map(|e| e.next).min();
        Ok(pushed)
    }
}

async fn read_marks(conn: &mut Conn) -> Result<(Option<String>, i64)> {
    let keys = conn.keys().clone();
    let mut pipe = redis::pipe();
    pipe.cmd("GET")
        .arg(keys.cron_changes())
        .cmd("SCARD")
        .arg(keys.cron_jobs());
    conn.pipe(&pipe).await
}

/// Claims `tick` of schedule `name` and pushes its job, in one script call. True if this call
/// pushed it; false if the tick was already claimed or the schedule is disabled or gone.
async fn push_tick(
    conn: &mut Conn,
    name: &str,
    tick: i64,
    fields: &[Option<String>],
    now: f64,
) -> Result<bool> {
    push(conn, name, Some(tick), fields, now).await
}

/// Pushes schedule `name`'s job built from `fields`: for `tick`, claiming it (nothing is pushed if it
/// was claimed, or the schedule is disabled or gone); with no tick, at once ("run now": no claim, the
/// status not read, nothing pushed only if the schedule is gone). Records `last_enqueue_time` and
/// the jid as a tick does. True if pushed.
pub(crate) async fn push(
    conn: &mut Conn,
    name: &str,
    tick: Option<i64>,
    fields: &[Option<String>],
    now: f64,
) -> Result<bool> {
    let keys = conn.keys().clone();
    let built = job::build(name, fields, now, crate::dedup::new_jid())?;
    let member = format!("cron_job:{name}");
    let last_enqueue = last_enqueue_time(now);
    let history = serde_json::json!({ "jid": built.jid, "enqueued": last_enqueue }).to_string();
    let mut inv = scripts::CRON_ENQUEUE.prepare_invoke();
    inv.key(keys.cron_job(&member))
        .key(keys.cron_job(&format!("{member}:enqueued")))
        .key(keys.cron_job(&format!("{member}:jid_history")))
        .key(keys.queues())
        .key(keys.queue(&built.queue))
        .arg(tick.map(|t| float_string(t as f64)).unwrap_or_default())
        .arg(tick.map(tick_member).unwrap_or_default())
        .arg(&built.json)
        .arg(&built.queue)
        .arg(&last_enqueue)
        .arg(history)
        .arg(HISTORY - 1)
        .arg(format!("({}", float_string(now - REMEMBER as f64)));
    let n: i64 = conn.script(&inv).await?;
    Ok(n == 1)
}

/// A tick as sidekiq-cron names it in `:enqueued`: `Time#iso8601` in UTC (`2023-11-14T22:13:20Z`).
pub fn tick_member(tick: i64) -> String {
    chrono::DateTime::<chrono::Utc>::from_timestamp(tick, 0)
        .map(|t| t.format("%Y-%m-%dT%H:%M:%SZ").to_string())
        .unwrap_or_default()
}

/// `last_enqueue_time` as sidekiq-cron writes it: `%Y-%m-%d %H:%M:%S %z` in UTC.
pub fn last_enqueue_time(now: f64) -> String {
    chrono::DateTime::<chrono::Utc>::from_timestamp(now.floor() as i64, 0)
        .map(|t| t.format("%Y-%m-%d %H:%M:%S +0000").to_string())
        .unwrap_or_default()
}

/// A `last_enqueue_time` as epoch seconds: sidekiq-cron's `%Y-%m-%d %H:%M:%S %z`, or the
/// `2023-11-14 22:13:20 UTC` its `save` writes back (Ruby's `Time#to_s` of the parsed value).
pub fn parse_last_enqueue_time(text: &str) -> Option<i64> {
    let text = text.trim();
    let text = match text.strip_suffix(" UTC") {
        Some(t) => format!("{t} +0000"),
        None => text.to_owned(),
    };
    chrono::DateTime::parse_from_str(&text, "%Y-%m-%d %H:%M:%S %z")
        .ok()
        .map(|t| t.timestamp())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn last_enqueue_times_are_read_in_both_forms() {
        assert_eq!(
            parse_last_enqueue_time("2023-11-14 22:13:20 +0000"),
            Some(1700000000)
        );
        assert_eq!(
            parse_last_enqueue_time("2023-11-14 23:13:20 +0100"),
            Some(1700000000)
        );
        assert_eq!(
            parse_last_enqueue_time("2023-11-14 22:13:20 UTC"),
            Some(1700000000)
        );
        assert_eq!(parse_last_enqueue_time(""), None);
    }

    #[test]
    fn ticks_and_times_are_written_as_sidekiq_cron_writes_them() {
        assert_eq!(tick_member(1700000000), "2023-11-14T22:13:20Z");
        assert_eq!(float_string(1700000000_f64), "1700000000.0");
        assert_eq!(last_enqueue_time(1700000000.7), "2023-11-14 22:13:20 +0000");
    }
}
