//! The push side: what `perform_async`, `perform_in` and `push_bulk` write.
//!
//! The Ruby client builds and serializes each job (middleware may change it); this module writes them
//! in Sidekiq's layout: an immediate job is `LPUSH`ed onto `queue:<name>` with the name added to
//! `queues`; a future job is `ZADD`ed to `schedule` scored by its run-at time. Each call is one round
//! trip however many jobs it carries. The commands are built once here and sent either on an async
//! [`Conn`] or on a [`SyncConn`]: [`push_sync`] and [`schedule_sync`] are exactly what the Ruby
//! client's `perform_async` and `perform_in` run, on the calling thread's connection. With
//! `wait_replicas` configured, each push also waits for replicas ([`crate::link::wait_replicas`]).

use crate::clock::float_string;
use crate::error::{Error, Result};
use crate::keys::Keys;
use crate::link::blocking::SyncConn;
use crate::link::connection::Conn;
use crate::link::wait_replicas;

/// The commands of an immediate push: the queue name into `queues`, the jobs onto its list (in the
/// order given, so the first runs first). One round trip on either kind of connection.
pub fn push_pipeline(keys: &Keys, queue: &str, jobs: &[Vec<u8>]) -> Result<redis::Pipeline> {
    check_queue_name(queue)?;
    let mut pipe = redis::pipe();
    pipe.cmd("SADD").arg(keys.queues()).arg(queue).ignore();
    pipe.cmd("LPUSH").arg(keys.queue(queue)).arg(jobs).ignore();
    Ok(pipe)
}

/// The command that adds jobs to `schedule`, each with its run-at time (epoch seconds).
pub fn schedule_cmd(keys: &Keys, jobs: &[(f64, Vec<u8>)]) -> Result<redis::Cmd> {
    let mut cmd = redis::cmd("ZADD");
    cmd.arg(keys.schedule());
    for (at, job) in jobs {
        if !at.is_finite() {
            return Err(Error::InvalidArgument(format!(
                "scheduled time must be a finite number, got {at}"
            )));
        }
        cmd.arg(float_string(*at)).arg(job);
    }
    Ok(cmd)
}

/// Pushes serialized jobs onto one queue, on a caller's synchronous connection (the Ruby client).
pub fn push_sync(conn: &mut SyncConn, queue: &str, jobs: &[Vec<u8>]) -> Result<()> {
    let pipe = push_pipeline(conn.keys(), queue, jobs)?;
    if jobs.is_empty() {
        return Ok(());
    }
    wait_replicas::pipe_sync(conn, pipe)
}

/// Adds serialized jobs to the `schedule` set, on a caller's synchronous connection.
pub fn schedule_sync(conn: &mut SyncConn, jobs: &[(f64, Vec<u8>)]) -> Result<()> {
    let cmd = schedule_cmd(conn.keys(), jobs)?;
    if jobs.is_empty() {
        return Ok(());
    }
    match conn.wait_replicas() {
        None => conn.cmd::<i64>(&cmd).map(|_| ()),
        Some(wait) => wait.pipe_sync(conn, ignored(cmd)),
    }
}

/// Pushes serialized jobs onto one queue.
pub async fn push(conn: &mut Conn, queue: &str, jobs: &[Vec<u8>]) -> Result<()> {
    let pipe = push_pipeline(conn.keys(), queue, jobs)?;
    if jobs.is_empty() {
        return Ok(());
    }
    match conn.redis().wait_replicas() {
        None => conn.pipe(&pipe).await,
        Some(wait) => wait.pipe(conn, pipe).await,
    }
}

/// Adds serialized jobs to the `schedule` set.
pub async fn schedule(conn: &mut Conn, jobs: &[(f64, Vec<u8>)]) -> Result<()> {
    let cmd = schedule_cmd(conn.keys(), jobs)?;
    if jobs.is_empty() {
        return Ok(());
    }
    match conn.redis().wait_replicas() {
        None => conn.cmd::<i64>(&cmd).await.map(|_| ()),
        Some(wait) => wait.pipe(conn, ignored(cmd)).await,
    }
}

/// One command as a pipeline whose reply is ignored (for `WAIT` to follow it).
fn ignored(cmd: redis::Cmd) -> redis::Pipeline {
    let mut pipe = redis::pipe();
    pipe.add_command(cmd).ignore();
    pipe
}

/// Sidekiq requires a non-empty queue name; we also refuse characters that would make the key
/// ambiguous to read back.
pub fn check_queue_name(queue: &str) -> Result<()> {
    if queue.is_empty() {
        return Err(Error::InvalidArgument(
            "queue name must not be empty".to_owned(),
        ));
    }
    if queue.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(Error::InvalidArgument(format!(
            "queue name {queue:?} must not contain whitespace"
        )));
    }
    Ok(())
}

/// A job of `perform_async`'s common case, built here rather than in Ruby: the worker's options as a
/// JSON object without its closing brace (`{"retry":true,"queue":"default","class":"HardWorker"`),
/// then `"args"`, a new jid, `created_at` and `enqueued_at`, in Sidekiq's field order.
pub fn new_job(prefix: &[u8], args_json: &[u8], now: f64) -> Result<(String, Vec<u8>)> {
    if prefix.len() < 2 || prefix[0] != b'{' || prefix.last() == Some(&b'}') {
        return Err(Error::InvalidJob(
            "a job template must be a JSON object without its closing brace".to_owned(),
        ));
    }
    let jid = crate::dedup::new_jid();
    let now = float_string(now);
    let mut json = Vec::with_capacity(prefix.len() + args_json.len() + jid.len() + 80);
    json.extend_from_slice(prefix);
    json.extend_from_slice(b",\"args\":");
    json.extend_from_slice(args_json);
    for part in [
        ",\"jid\":\"",
        &jid,
        "\",\"created_at\":",
        &now,
        ",\"enqueued_at\":",
        &now,
        "}",
    ] {
        json.extend_from_slice(part.as_bytes());
    }
    Ok((jid, json))
}

/// `perform_bulk` in one call: each job built from the worker's template ([`new_job`], one time for
/// all, as Sidekiq stamps a bulk push) and its arguments, all queued in one round trip (through the
/// deduplicating script when the worker has deduplication). Returns the jids of the jobs queued, in
/// order; duplicates dropped are left out.
pub fn push_bulk_new_sync<A: AsRef<[u8]>>(
    conn: &mut SyncConn,
    queue: &str,
    prefix: &[u8],
    args_jsons: &[A],
    dedup: Option<&crate::dedup::PushOptions>,
) -> Result<Vec<String>> {
    let now = crate::clock::now_f64();
    let (jids, jsons): (Vec<String>, Vec<Vec<u8>>) = args_jsons
        .iter()
        .map(|args| new_job(prefix, args.as_ref(), now))
        .collect::<Result<Vec<_>>>()?
        .into_iter()
        .unzip();
    let Some(opts) = dedup else {
        push_sync(conn, queue, &jsons)?;
        return Ok(jids);
    };
    let jobs: Vec<crate::dedup::DedupJob> = jids
        .into_iter()
        .zip(jsons)
        .zip(args_jsons)
        .map(|((jid, json), args)| crate::dedup::DedupJob {
            jid,
            json,
            args: args.as_ref().to_vec(),
            at: None,
        })
        .collect();
    let outcomes = crate::dedup::push_sync(conn, queue, opts, &jobs)?;
    Ok(jobs
        .into_iter()
        .zip(outcomes)
        .filter(|(_, outcome)| !matches!(outcome, crate::dedup::Outcome::Dropped(_)))
        .map(|(job, _)| job.jid)
        .collect())
}

/// What became of a job pushed by [`push_new_sync`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pushed {
    /// Queued under this jid (marked `duplicate-of` when its worker is deduplicated but not
    /// idempotent).
    Queued(String),
    /// Dropped as a duplicate of the job holding its idempotency key.
    Dropped,
}

/// `perform_async` in one call: [`push_bulk_new_sync`] with one job, built from the worker's template
/// and queued through the deduplicating script when the worker has deduplication (`args_json` is
/// then also what its idempotency key hashes, as Ruby's `JSON.generate(args)` would write it).
pub fn push_new_sync(
    conn: &mut SyncConn,
    queue: &str,
    prefix: &[u8],
    args_json: &[u8],
    dedup: Option<&crate::dedup::PushOptions>,
) -> Result<Pushed> {
    let mut jids = push_bulk_new_sync(conn, queue, prefix, &[args_json], dedup)?;
    Ok(jids.pop().map_or(Pushed::Dropped, Pushed::Queued))
}
