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
use crate::resp;

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
    check_template(prefix)?;
    let jid = crate::dedup::new_jid();
    let now = float_string(now);
    let json = job_parts(prefix, args_json, &jid, &now, [b""; 4]).concat();
    Ok((jid, json))
}

/// A template's prefix must be a JSON object without its closing brace.
pub(crate) fn check_template(prefix: &[u8]) -> Result<()> {
    if prefix.len() < 2 || prefix[0] != b'{' || prefix.last() == Some(&b'}') {
        return Err(Error::InvalidJob(
            "a job template must be a JSON object without its closing brace".to_owned(),
        ));
    }
    Ok(())
}

/// [`new_job`]'s JSON in parts, to be written where it goes (into a command, [`crate::resp`])
/// without being assembled first; `key` is an `idempotency_key` field to add last, in up to four
/// parts (empty for none).
pub(crate) fn job_parts<'a>(
    prefix: &'a [u8],
    args_json: &'a [u8],
    jid: &'a str,
    now: &'a str,
    key: [&'a [u8]; 4],
) -> [&'a [u8]; 14] {
    [
        prefix,
        b",\"args\":",
        args_json,
        b",\"jid\":\"",
        jid.as_bytes(),
        b"\",\"created_at\":",
        now.as_bytes(),
        b",\"enqueued_at\":",
        now.as_bytes(),
        key[0],
        key[1],
        key[2],
        key[3],
        b"}",
    ]
}

/// [`push_bulk_new_sync`] without deduplication or `wait_replicas`: `SADD` and `LPUSH` written
/// straight into one buffer, each job in place (`resp`), and handed to the connection as it is.
fn push_new_packed<A: AsRef<[u8]>>(
    conn: &mut SyncConn,
    queue: &str,
    prefix: &[u8],
    args_jsons: &[A],
    now: f64,
) -> Result<Vec<String>> {
    check_queue_name(queue)?;
    check_template(prefix)?;
    if args_jsons.is_empty() {
        return Ok(Vec::new());
    }
    let now = float_string(now);
    let jids: Vec<String> = args_jsons.iter().map(|_| crate::dedup::new_jid()).collect();
    let packed = push_command(conn.keys(), queue, prefix, args_jsons, &jids, &now);
    conn.call_packed(packed, 2)?;
    Ok(jids)
}

/// The bytes of [`push_pipeline`] for jobs built from a template, each job written in place.
fn push_command<A: AsRef<[u8]>>(
    keys: &Keys,
    queue: &str,
    prefix: &[u8],
    args_jsons: &[A],
    jids: &[String],
    now: &str,
) -> Vec<u8> {
    let (ns, name) = (keys.namespace().as_bytes(), queue.as_bytes());
    let jobs = args_jsons
        .iter()
        .map(|args| resp::bulk_len(prefix.len() + args.as_ref().len() + 2 * now.len() + 80))
        .sum::<usize>();
    let mut out = Vec::with_capacity(jobs + 2 * (ns.len() + name.len()) + 120);
    resp::array(&mut out, 3);
    resp::bulk(&mut out, &[b"SADD"]);
    resp::bulk(&mut out, &[ns, b"queues"]);
    resp::bulk(&mut out, &[name]);
    resp::array(&mut out, 2 + args_jsons.len());
    resp::bulk(&mut out, &[b"LPUSH"]);
    resp::bulk(&mut out, &[ns, b"queue:", name]);
    for (args, jid) in args_jsons.iter().zip(jids) {
        let parts = job_parts(prefix, args.as_ref(), jid, now, [b""; 4]);
        resp::bulk(&mut out, &parts);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The packed push is byte for byte the pipeline of the general path.
    #[test]
    fn the_packed_push_is_the_pipelines_bytes() {
        let prefix = br#"{"retry":true,"queue":"default","class":"HardWorker""#;
        let args: [&[u8]; 3] = [b"[]", b"[1,\"two\"]", b"[{\"a\":null}]"];
        let now = float_string(1795831285.5);
        for namespace in ["", "app:"] {
            let keys = Keys::new(namespace);
            let jids: Vec<String> = args.iter().map(|_| crate::dedup::new_jid()).collect();
            let jobs: Vec<Vec<u8>> = args
                .iter()
                .zip(&jids)
                .map(|(a, jid)| job_parts(prefix, a, jid, &now, [b""; 4]).concat())
                .collect();
            let pipeline = push_pipeline(&keys, "default", &jobs)
                .expect("pipeline")
                .get_packed_pipeline();
            let packed = push_command(&keys, "default", prefix, &args, &jids, &now);
            assert_eq!(
                String::from_utf8_lossy(&packed),
                String::from_utf8_lossy(&pipeline)
            );
        }
        let (jid, json) = new_job(prefix, b"[1]", 1795831285.5).expect("job");
        assert_eq!(
            String::from_utf8(json).expect("utf-8"),
            format!(
                r#"{{"retry":true,"queue":"default","class":"HardWorker","args":[1],"jid":"{jid}","created_at":1795831285.5,"enqueued_at":1795831285.5}}"#
            )
        );
    }
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
    push_bulk_new_with(conn, queue, prefix, args_jsons, dedup, None)
}

/// [`push_bulk_new_sync`], with the template's [`crate::dedup::OnePush`] for a deduplicated push of
/// one job.
fn push_bulk_new_with<A: AsRef<[u8]>>(
    conn: &mut SyncConn,
    queue: &str,
    prefix: &[u8],
    args_jsons: &[A],
    dedup: Option<&crate::dedup::PushOptions>,
    one: Option<&crate::dedup::OnePush>,
) -> Result<Vec<String>> {
    let now = crate::clock::now_f64();
    if conn.wait_replicas().is_none() {
        match dedup {
            None => return push_new_packed(conn, queue, prefix, args_jsons, now),
            Some(opts) => {
                if let [args] = args_jsons {
                    let jid = crate::dedup::new_jid();
                    match crate::dedup::push_new_one_sync(
                        conn,
                        queue,
                        opts,
                        (prefix, args.as_ref()),
                        &jid,
                        now,
                        one,
                    )? {
                        Some(crate::dedup::Outcome::Dropped(_)) => return Ok(Vec::new()),
                        Some(_) => return Ok(vec![jid]),
                        None => {}
                    }
                }
            }
        }
    }
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
    push_new_with(conn, queue, prefix, args_json, dedup, None)
}

/// [`push_new_sync`] for a worker's template that keeps a [`crate::dedup::OnePush`] (`one`, made by
/// [`crate::dedup::OnePush::new`] for the template): a deduplicated push then copies the command's
/// fixed bytes from it instead of writing them again.
pub fn push_new_with(
    conn: &mut SyncConn,
    queue: &str,
    prefix: &[u8],
    args_json: &[u8],
    dedup: Option<&crate::dedup::PushOptions>,
    one: Option<&crate::dedup::OnePush>,
) -> Result<Pushed> {
    let mut jids = push_bulk_new_with(conn, queue, prefix, &[args_json], dedup, one)?;
    Ok(jids.pop().map_or(Pushed::Dropped, Pushed::Queued))
}
