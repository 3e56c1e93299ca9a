//! Reading and writing schedules in sidekiq-cron 1.8's keys, for `JobQueue::Cron` (the Ruby API):
//! the `cron_jobs` set, each `cron_job:<name>` hash, and its `:enqueued` and `:jid_history` keys. The
//! Ruby side decides the fields (as sidekiq-cron's `Job#to_hash` does); the engine checks the cron
//! string, writes atomically ([`scripts::CRON_ADMIN`]) and bumps the change counter the scheduler
//! leader watches.

use crate::clock::float_string;
use crate::cron::job::FIELDS;
use crate::cron::schedule::Schedule;
use crate::cron::tab::{push, tick_member};
use crate::error::{Error, Result};
use crate::link::connection::Conn;
use crate::scripts;

/// A schedule's hash, field by field, as stored.
pub type Fields = Vec<(String, String)>;

fn member(name: &str) -> String {
    format!("cron_job:{name}")
}

/// Checks a cron string for schedule `name`; the error names the schedule.
pub fn check(name: &str, cron: &str) -> Result<Schedule> {
    Schedule::parse(name, cron).map_err(|e| Error::InvalidArgument(e.to_string()))
}

fn admin(conn: &Conn, op: &str, name: &str) -> redis::ScriptInvocation<'static> {
    let keys = conn.keys();
    let m = member(name);
    let mut inv = scripts::CRON_ADMIN.prepare_invoke();
    inv.key(keys.cron_jobs())
        .key(keys.cron_job(&m))
        .key(keys.cron_job(&format!("{m}:enqueued")))
        .key(keys.cron_job(&format!("{m}:jid_history")))
        .key(keys.cron_changes())
        .arg(op)
        .arg(m);
    inv
}

/// Saves schedule `name` with `fields` (which must hold its `cron`), at `now` (epoch seconds).
pub async fn save(
    conn: &mut Conn,
    name: &str,
    fields: &[(String, String)],
    now: f64,
) -> Result<()> {
    if name.is_empty() {
        return Err(Error::InvalidArgument(
            "a cron schedule needs a name".to_owned(),
        ));
    }
    let cron = fields
        .iter()
        .find(|(k, _)| k == "cron")
        .map(|(_, v)| v.as_str())
        .ok_or_else(|| Error::InvalidArgument(format!("cron schedule {name:?}: no cron string")))?;
    let schedule = check(name, cron)?;
    let tick = schedule
        .tick_at_or_before(now.floor() as i64)
        .map(tick_member)
        .unwrap_or_default();
    let mut inv = admin(conn, "save", name);
    inv.arg(float_string(now)).arg(tick);
    for (k, v) in fields {
        inv.arg(k).arg(v);
    }
    conn.script::<i64>(&inv).await?;
    Ok(())
}

/// Sets a schedule's `status` (`enabled`/`disabled`). False if there is no such schedule.
pub async fn set_status(conn: &mut Conn, name: &str, enabled: bool) -> Result<bool> {
    let mut inv = admin(conn, "status", name);
    inv.arg(if enabled { "enabled" } else { "disabled" });
    Ok(conn.script::<i64>(&inv).await? == 1)
}

/// Removes a schedule and its keys. False if there was none.
pub async fn destroy(conn: &mut Conn, name: &str) -> Result<bool> {
    let inv = admin(conn, "destroy", name);
    Ok(conn.script::<i64>(&inv).await? == 1)
}

/// Every schedule's hash (those listed in `cron_jobs` whose hash exists).
pub async fn all(conn: &mut Conn) -> Result<Vec<Fields>> {
    let keys = conn.keys().clone();
    let members: Vec<String> = conn
        .cmd(redis::cmd("SMEMBERS").arg(keys.cron_jobs()))
        .await?;
    if members.is_empty() {
        return Ok(Vec::new());
    }
    let mut pipe = redis::pipe();
    for m in &members {
        pipe.cmd("HGETALL").arg(keys.cron_job(m));
    }
    let hashes: Vec<Fields> = conn.pipe(&pipe).await?;
    Ok(hashes.into_iter().filter(|h| !h.is_empty()).collect())
}

/// One schedule's hash, if it exists.
pub async fn find(conn: &mut Conn, name: &str) -> Result<Option<Fields>> {
    let key = conn.keys().cron_job(&member(name));
    let fields: Fields = conn.cmd(redis::cmd("HGETALL").arg(key)).await?;
    Ok(Some(fields).filter(|f| !f.is_empty()))
}

/// The `:jid_history` entries of a schedule, newest first, as stored (JSON).
pub async fn jid_history(conn: &mut Conn, name: &str) -> Result<Vec<String>> {
    let key = conn
        .keys()
        .cron_job(&format!("{}:jid_history", member(name)));
    conn.cmd(redis::cmd("LRANGE").arg(key).arg(0).arg(-1)).await
}

/// Pushes schedule `name`'s job now, as sidekiq-cron's `enque!` does (its dashboard's "Enqueue
/// now"): whatever its status, claiming no tick, recording `last_enqueue_time` and the jid. False if
/// there is no such schedule; an error naming it if its stored message cannot make a job.
pub async fn run_now(conn: &mut Conn, name: &str, now: f64) -> Result<bool> {
    let key = conn.keys().cron_job(&member(name));
    let mut cmd = redis::cmd("HMGET");
    cmd.arg(key);
    for f in FIELDS {
        cmd.arg(f);
    }
    let fields: Vec<Option<String>> = conn.cmd(&cmd).await?;
    if fields.iter().all(Option::is_none) {
        return Ok(false);
    }
    push(conn, name, None, &fields, now).await
}

/// The first tick of `cron` strictly after `now` (epoch seconds), if it has one.
pub fn next_tick(name: &str, cron: &str, now: i64) -> Result<Option<i64>> {
    Ok(check(name, cron)?.tick_after(now))
}
