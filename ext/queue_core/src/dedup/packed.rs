//! `perform_async`'s deduplicated push of a job built from its worker's template
//! (`client::push_new_sync`), written straight into one `EVALSHA` of `dedup_push_one.lua`.
//!
//! The general path builds the job's JSON, scans it for fields that would need a rewrite, copies it
//! again to splice the idempotency key in, puts each of the script's 12 keys and arguments in a
//! `Cmd` of their own, and the crate packs them once more. A job built from a template has only the
//! template's fields and `args`, `jid`, `created_at`, `enqueued_at`, so when the template's prefix
//! carries neither `idempotency_key` nor `wal_locations` the key's field is simply written last,
//! in place, and the whole command is one buffer (`resp`) handed to the connection as it is. The
//! bytes are the general path's (`tests` below compares them).

use redis::Value;

use crate::client::{check_template, job_parts};
use crate::clock::float_string;
use crate::error::{Error, Result};
use crate::link::blocking::SyncConn;
use crate::resp;
use crate::scripts;

use super::digest;
use super::push::{check, outcome, push_general_sync, DedupJob, FlagCheck, Outcome, PushOptions};

/// Pushes one job built from a template (`prefix` and the arguments' JSON) with deduplication, as
/// [`super::push_sync`] would push it. `None` when this path does not take it (nothing was sent):
/// `reschedule_once`, `wait_replicas`, or a prefix that carries a field the key's splice must not
/// meet. A held key that calls for more than a drop (a mark) goes to the general script, as there.
pub fn push_new_one_sync(
    conn: &mut SyncConn,
    queue: &str,
    opts: &PushOptions,
    (prefix, args): (&[u8], &[u8]),
    jid: &str,
    now: f64,
) -> Result<Option<Outcome>> {
    if opts.reschedule
        || conn.wait_replicas().is_some()
        || super::KEY_FIELD.find(prefix).is_some()
        || super::WAL_FIELD.find(prefix).is_some()
    {
        return Ok(None);
    }
    check(queue, opts)?;
    check_template(prefix)?;
    let key = conn.keys().duplicate(queue, &digest(&opts.class, args));
    let now = float_string(now);
    let job = Job {
        prefix,
        args,
        jid,
        now: &now,
        key: &key,
    };
    let send = |conn: &mut SyncConn| {
        let packed = command(conn.keys().namespace(), queue, opts, &job);
        conn.exchange_packed(packed, 1)
    };
    let mut replies = send(conn)?;
    if is_noscript(&replies) {
        conn.load(&scripts::DEDUP_PUSH_ONE)?;
        replies = send(conn)?;
    }
    let reply = conn.replied(replies)?.into_iter().next();
    let status = redis::from_redis_value::<Option<String>>(reply.unwrap_or(Value::Nil))
        .map_err(|e| Error::from(redis::RedisError::from(e)))?;
    if let Some(status) = status {
        return Ok(Some(outcome(status)));
    }
    // The key is held and the duplicate is to be marked: the general script does it.
    let job = DedupJob {
        jid: jid.to_owned(),
        json: job_parts(prefix, args, jid, &now, [b"", b"", b""]).concat(),
        args: args.to_vec(),
        at: None,
    };
    push_general_sync(conn, queue, opts, &[job])?
        .pop()
        .map(Some)
        .ok_or_else(|| Error::InvalidJob("the push script answered nothing for the job".to_owned()))
}

/// What the command carries of the job: its template's prefix, its arguments, jid and time, and
/// its idempotency key.
struct Job<'a> {
    prefix: &'a [u8],
    args: &'a [u8],
    jid: &'a str,
    now: &'a str,
    key: &'a str,
}

/// The `EVALSHA` `push::one_command` builds, with the key's field written into the job in place.
fn command(namespace: &str, queue: &str, opts: &PushOptions, job: &Job<'_>) -> Vec<u8> {
    let (ns, name, key) = (namespace.as_bytes(), queue.as_bytes(), job.key.as_bytes());
    // A key needs JSON escapes only if its namespace or queue has a quote or a backslash.
    let quoted = key
        .iter()
        .any(|&b| b == b'"' || b == b'\\' || b < 0x20)
        .then(|| serde_json::to_string(job.key).unwrap_or_default());
    let field: [&[u8]; 3] = match &quoted {
        Some(quoted) => [b",\"idempotency_key\":", quoted.as_bytes(), b""],
        None => [b",\"idempotency_key\":\"", key, b"\""],
    };
    let json = job_parts(job.prefix, job.args, job.jid, job.now, field);
    let (flag, drop): ([&[u8]; 3], bool) = match opts.flag {
        FlagCheck::Redis => ([b"disable_", name, b"_deduplication"], opts.idempotent),
        FlagCheck::Given(off) => ([b"", b"", b""], opts.idempotent && !off),
    };
    let name_len = queue.len().to_string();
    // metrics::field::name(Kind::Dropped, queue, class)
    let drops: [&[u8]; 6] = [
        b"d:",
        name_len.as_bytes(),
        b":",
        name,
        b":",
        opts.class.as_bytes(),
    ];
    let len = json.iter().map(|p| p.len()).sum::<usize>()
        + 4 * ns.len()
        + 4 * name.len()
        + key.len()
        + opts.class.len()
        + 400;
    let mut out = Vec::with_capacity(len);
    resp::array(&mut out, 15);
    resp::bulk(&mut out, &[b"EVALSHA"]);
    resp::bulk(&mut out, &[scripts::DEDUP_PUSH_ONE.get_hash().as_bytes()]);
    resp::bulk(&mut out, &[b"5"]);
    resp::bulk(&mut out, &[ns, b"queues"]);
    resp::bulk(&mut out, &[ns, b"queue:", name]);
    resp::bulk(&mut out, &[key]);
    resp::bulk(&mut out, &[ns, b"jq:features"]);
    resp::bulk(&mut out, &[ns, b"jq:metrics"]);
    resp::bulk(&mut out, &[name]);
    resp::bulk(&mut out, &[job.jid.as_bytes()]);
    resp::bulk_number(&mut out, opts.ttl);
    resp::bulk(&mut out, &json);
    resp::bulk(&mut out, &[if drop { b"1" } else { b"0" }]);
    resp::bulk(&mut out, &flag);
    resp::bulk(&mut out, &drops);
    out
}

/// The script was not in the server's cache: nothing ran.
fn is_noscript(replies: &[Value]) -> bool {
    matches!(replies.first(), Some(Value::ServerError(e)) if e.code() == "NOSCRIPT")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::new_job;
    use crate::keys::Keys;

    fn opts(flag: FlagCheck) -> PushOptions {
        PushOptions {
            class: "AuthorizedProjectsWorker".to_owned(),
            ttl: 21600,
            idempotent: true,
            reschedule: false,
            flag,
        }
    }

    /// The command is byte for byte the one the general path builds for the same job.
    #[test]
    fn writes_the_general_paths_command() {
        let prefix = br#"{"retry":true,"queue":"de\"fault","class":"AuthorizedProjectsWorker""#;
        for (namespace, queue) in [("", "default"), ("app:", "de\"fault"), ("a\\b:", "q")] {
            for flag in [
                FlagCheck::Redis,
                FlagCheck::Given(true),
                FlagCheck::Given(false),
            ] {
                let (keys, opts) = (Keys::new(namespace), opts(flag));
                let (jid, json) = new_job(prefix, b"[42,\"x\"]", 1795831285.9261465).expect("job");
                let job = DedupJob {
                    jid: jid.clone(),
                    json,
                    args: b"[42,\"x\"]".to_vec(),
                    at: None,
                };
                let general = super::super::push::one_command_for(&keys, queue, &opts, &job)
                    .expect("one-job command")
                    .get_packed_command();
                let key = keys.duplicate(queue, &digest(&opts.class, b"[42,\"x\"]"));
                let packed = command(
                    namespace,
                    queue,
                    &opts,
                    &Job {
                        prefix,
                        args: b"[42,\"x\"]",
                        jid: &jid,
                        now: &float_string(1795831285.9261465),
                        key: &key,
                    },
                );
                assert_eq!(
                    String::from_utf8_lossy(&packed),
                    String::from_utf8_lossy(&general),
                    "namespace {namespace:?}, queue {queue:?}, flag {flag:?}"
                );
            }
        }
    }
}
