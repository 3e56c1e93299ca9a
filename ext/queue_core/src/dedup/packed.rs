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
use crate::keys::Keys;
use crate::link::blocking::SyncConn;
use crate::resp;
use crate::scripts;

use super::digest_hex;
use super::push::{check, outcome, push_general_sync, DedupJob, FlagCheck, Outcome, PushOptions};

/// Pushes one job built from a template (`prefix` and the arguments' JSON) with deduplication, as
/// [`super::push_sync`] would push it. `None` when this path does not take it (nothing was sent):
/// `reschedule_once`, `wait_replicas`, or a prefix that carries a field the key's splice must not
/// meet. A held key that calls for more than a drop (a mark) goes to the general script, as there.
/// `one` is the template's [`OnePush`], when it has one: the command is then written around the
/// bytes it keeps, where it fits the push (else it is left aside).
pub fn push_new_one_sync(
    conn: &mut SyncConn,
    queue: &str,
    opts: &PushOptions,
    (prefix, args): (&[u8], &[u8]),
    jid: &str,
    now: f64,
    one: Option<&OnePush>,
) -> Result<Option<Outcome>> {
    if conn.wait_replicas().is_some() {
        return Ok(None);
    }
    let one = one.filter(|one| one.fits(conn.keys().namespace(), queue, opts));
    if one.is_none() {
        if !takes(opts, prefix) {
            return Ok(None);
        }
        check(queue, opts)?;
        check_template(prefix)?;
    }
    let digest = digest_hex(&opts.class, args);
    let now = float_string(now);
    let job = Job {
        prefix,
        args,
        jid,
        now: &now,
    };
    let send = |conn: &mut SyncConn| {
        let packed = match one {
            Some(one) => one.command(&job, &digest),
            None => {
                let key = conn.keys().duplicate(queue, hex_str(&digest));
                command(conn.keys().namespace(), queue, opts, &job, &key)
            }
        };
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
        json: job_parts(prefix, args, jid, &now, [b""; 4]).concat(),
        args: args.to_vec(),
        at: None,
    };
    push_general_sync(conn, queue, opts, &[job])?
        .pop()
        .map(Some)
        .ok_or_else(|| Error::InvalidJob("the push script answered nothing for the job".to_owned()))
}

/// Whether this path takes a template's jobs: no `reschedule_once`, and a prefix without the fields
/// the key's splice must not meet.
fn takes(opts: &PushOptions, prefix: &[u8]) -> bool {
    !opts.reschedule
        && super::KEY_FIELD.find(prefix).is_none()
        && super::WAL_FIELD.find(prefix).is_none()
}

/// The digest's hex digits as text (they are ASCII).
fn hex_str(digest: &[u8; 64]) -> &str {
    std::str::from_utf8(digest).unwrap_or_default()
}

/// What the command carries of the job: its template's prefix, its arguments, jid and time.
struct Job<'a> {
    prefix: &'a [u8],
    args: &'a [u8],
    jid: &'a str,
    now: &'a str,
}

/// The `EVALSHA` `push::one_command` builds, with the key's field written into the job in place.
fn command(namespace: &str, queue: &str, opts: &PushOptions, job: &Job<'_>, key: &str) -> Vec<u8> {
    let (ns, name, key) = (namespace.as_bytes(), queue.as_bytes(), key.as_bytes());
    // A key needs JSON escapes only if its namespace or queue has a quote or a backslash.
    let quoted = needs_escapes(key)
        .then(|| serde_json::to_string(&String::from_utf8_lossy(key)).unwrap_or_default());
    let field: [&[u8]; 4] = match &quoted {
        Some(quoted) => [b",\"idempotency_key\":", quoted.as_bytes(), b"", b""],
        None => [b",\"idempotency_key\":\"", key, b"", b"\""],
    };
    let json = job_parts(job.prefix, job.args, job.jid, job.now, field);
    let len = json.iter().map(|p| p.len()).sum::<usize>()
        + 4 * ns.len()
        + 4 * name.len()
        + key.len()
        + opts.class.len()
        + 400;
    let mut out = Vec::with_capacity(len);
    head(&mut out, ns, name);
    resp::bulk(&mut out, &[key]);
    mid(&mut out, ns, name);
    resp::bulk(&mut out, &[job.jid.as_bytes()]);
    resp::bulk_number(&mut out, opts.ttl);
    resp::bulk(&mut out, &json);
    tail(&mut out, queue, opts);
    out
}

/// The command's header, name, script and key count, and KEYS[1] and KEYS[2]: the queues' set and
/// the queue's list.
fn head(out: &mut Vec<u8>, ns: &[u8], name: &[u8]) {
    resp::array(out, 15);
    resp::bulk(out, &[b"EVALSHA"]);
    resp::bulk(out, &[scripts::DEDUP_PUSH_ONE.get_hash().as_bytes()]);
    resp::bulk(out, &[b"5"]);
    resp::bulk(out, &[ns, b"queues"]);
    resp::bulk(out, &[ns, b"queue:", name]);
}

/// KEYS[4], KEYS[5] and ARGV[1]: the flags, the metrics, the queue's name.
fn mid(out: &mut Vec<u8>, ns: &[u8], name: &[u8]) {
    resp::bulk(out, &[ns, b"jq:features"]);
    resp::bulk(out, &[ns, b"jq:metrics"]);
    resp::bulk(out, &[name]);
}

/// ARGV[5] to ARGV[7]: whether to drop, the flag's field, the drops' field.
fn tail(out: &mut Vec<u8>, queue: &str, opts: &PushOptions) {
    let name = queue.as_bytes();
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
    resp::bulk(out, &[if drop { b"1" } else { b"0" }]);
    resp::bulk(out, &flag);
    resp::bulk(out, &drops);
}

/// Whether a key must be escaped in JSON.
fn needs_escapes(key: &[u8]) -> bool {
    key.iter().any(|&b| b == b'"' || b == b'\\' || b < 0x20)
}

/// A template's one-job `EVALSHA` less what changes from job to job (the key's digest, the jid and
/// the job): the rest of its 15 arguments is the same for every push of the template, so it is
/// written once, here, and each push copies it ([`command`]'s bytes). Made on a template's first
/// push (`PushTemplate`), for the namespace of that push's connection, with the flag read in Redis
/// (the default flag store). A push uses it only where it fits: the same namespace, queue and
/// options.
#[derive(Debug)]
pub struct OnePush {
    namespace: String,
    queue: String,
    opts: PushOptions,
    /// Up to KEYS[2] ([`head`]).
    head: Vec<u8>,
    /// The idempotency key before its digest: `<namespace>duplicate:<queue>:`.
    key_prefix: Vec<u8>,
    /// KEYS[4] to ARGV[1] ([`mid`]).
    mid: Vec<u8>,
    /// ARGV[3], the key's TTL.
    ttl: Vec<u8>,
    /// ARGV[5] to ARGV[7] ([`tail`]).
    tail: Vec<u8>,
}

impl OnePush {
    /// `None` where [`push_new_one_sync`] does not take the template's jobs, where the queue or the
    /// options are not valid (each push then reports it), where the flag is not read in Redis, or
    /// where the key would need JSON escapes (a quote or backslash in the namespace or the queue).
    pub fn new(keys: &Keys, queue: &str, opts: &PushOptions, prefix: &[u8]) -> Option<OnePush> {
        let valid = check(queue, opts).is_ok() && check_template(prefix).is_ok();
        if !valid || !takes(opts, prefix) || opts.flag != FlagCheck::Redis {
            return None;
        }
        let key_prefix = keys.duplicate(queue, "").into_bytes();
        if needs_escapes(&key_prefix) {
            return None;
        }
        let (ns, name) = (keys.namespace().as_bytes(), queue.as_bytes());
        let mut one = OnePush {
            namespace: keys.namespace().to_owned(),
            queue: queue.to_owned(),
            opts: opts.clone(),
            head: Vec::new(),
            key_prefix,
            mid: Vec::new(),
            ttl: Vec::new(),
            tail: Vec::new(),
        };
        head(&mut one.head, ns, name);
        mid(&mut one.mid, ns, name);
        resp::bulk_number(&mut one.ttl, opts.ttl);
        tail(&mut one.tail, queue, opts);
        Some(one)
    }

    /// Whether it was made for a push of these.
    fn fits(&self, namespace: &str, queue: &str, opts: &PushOptions) -> bool {
        let made = &self.opts;
        self.namespace == namespace
            && self.queue == queue
            && made.class == opts.class
            && made.ttl == opts.ttl
            && made.idempotent == opts.idempotent
            && made.reschedule == opts.reschedule
            && made.flag == opts.flag
    }

    /// The command for `job`, whose key's digest is `digest`.
    fn command(&self, job: &Job<'_>, digest: &[u8; 64]) -> Vec<u8> {
        let key: [&[u8]; 2] = [&self.key_prefix, digest];
        let field = [b",\"idempotency_key\":\"", key[0], key[1], b"\""];
        let json = job_parts(job.prefix, job.args, job.jid, job.now, field);
        let json_len = json.iter().map(|p| p.len()).sum::<usize>();
        let mut out = Vec::with_capacity(
            self.head.len()
                + self.mid.len()
                + self.ttl.len()
                + self.tail.len()
                + resp::bulk_len(self.key_prefix.len() + digest.len())
                + resp::bulk_len(job.jid.len())
                + resp::bulk_len(json_len),
        );
        out.extend_from_slice(&self.head);
        resp::bulk(&mut out, &key);
        out.extend_from_slice(&self.mid);
        resp::bulk(&mut out, &[job.jid.as_bytes()]);
        out.extend_from_slice(&self.ttl);
        resp::bulk(&mut out, &json);
        out.extend_from_slice(&self.tail);
        out
    }
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

    fn job<'a>(prefix: &'a [u8], jid: &'a str, now: &'a str) -> Job<'a> {
        Job {
            prefix,
            args: b"[42,\"x\"]",
            jid,
            now,
        }
    }

    /// The command is byte for byte the one the general path builds for the same job, and a
    /// template's [`OnePush`] writes it byte for byte too, wherever it makes one.
    #[test]
    fn writes_the_general_paths_command() {
        let prefix = br#"{"retry":true,"queue":"de\"fault","class":"AuthorizedProjectsWorker""#;
        let cases = [
            ("", "default"),
            ("app:", "de\"fault"),
            ("a\\b:", "q"),
            ("resque:gitlab:", "urgent_cpu_bound"),
        ];
        let mut one_pushes = 0;
        for (namespace, queue) in cases {
            for flag in [
                FlagCheck::Redis,
                FlagCheck::Given(true),
                FlagCheck::Given(false),
            ] {
                let (keys, opts) = (Keys::new(namespace), opts(flag));
                let (jid, json) = new_job(prefix, b"[42,\"x\"]", 1795831285.9261465).expect("job");
                let general_job = DedupJob {
                    jid: jid.clone(),
                    json,
                    args: b"[42,\"x\"]".to_vec(),
                    at: None,
                };
                let general =
                    super::super::push::one_command_for(&keys, queue, &opts, &general_job)
                        .expect("one-job command")
                        .get_packed_command();
                let digest = digest_hex(&opts.class, b"[42,\"x\"]");
                let key = keys.duplicate(queue, hex_str(&digest));
                let now = float_string(1795831285.9261465);
                let packed = command(namespace, queue, &opts, &job(prefix, &jid, &now), &key);
                let context = format!("namespace {namespace:?}, queue {queue:?}, flag {flag:?}");
                assert_eq!(
                    String::from_utf8_lossy(&packed),
                    String::from_utf8_lossy(&general),
                    "{context}"
                );
                let Some(one) = OnePush::new(&keys, queue, &opts, prefix) else {
                    let plain_key = !namespace.contains('\\') && !queue.contains('"');
                    assert!(
                        flag != FlagCheck::Redis || !plain_key,
                        "no OnePush for {context}"
                    );
                    continue;
                };
                one_pushes += 1;
                assert_eq!(
                    String::from_utf8_lossy(&one.command(&job(prefix, &jid, &now), &digest)),
                    String::from_utf8_lossy(&general),
                    "{context}"
                );
            }
        }
        assert_eq!(
            one_pushes, 2,
            "made for the flag read in Redis, where no escape is needed"
        );
    }

    /// No `OnePush` where this path does not take the template's jobs, or they are not valid.
    #[test]
    fn no_one_push_for_what_the_path_does_not_take() {
        let keys = Keys::new("");
        let prefix: &[u8] = br#"{"retry":true,"queue":"default","class":"W""#;
        let rescheduled = PushOptions {
            reschedule: true,
            ..opts(FlagCheck::Redis)
        };
        assert!(OnePush::new(&keys, "default", &rescheduled, prefix).is_none());
        let no_ttl = PushOptions {
            ttl: 0,
            ..opts(FlagCheck::Redis)
        };
        assert!(OnePush::new(&keys, "default", &no_ttl, prefix).is_none());
        assert!(OnePush::new(&keys, "", &opts(FlagCheck::Redis), prefix).is_none());
        let keyed: &[u8] = br#"{"retry":true,"idempotency_key":"k","class":"W""#;
        assert!(OnePush::new(&keys, "default", &opts(FlagCheck::Redis), keyed).is_none());
        assert!(OnePush::new(&keys, "default", &opts(FlagCheck::Redis), b"{}").is_none());
        assert!(OnePush::new(&keys, "default", &opts(FlagCheck::Redis), prefix).is_some());
    }
}
