//! The idempotency keys held now (GitLab-style deduplication, WIRE.md §2): a step of a `SCAN` over
//! the keyspace, and the operator's release of a key.
//!
//! Keys are not indexed anywhere (GitLab's are not either), so listing them is a cursor walk of the
//! whole keyspace: each [`page`] is one `SCAN cursor MATCH <namespace>duplicate:* COUNT n TYPE string`
//! (the `TYPE` leaves out the `:meta` side hashes) and one pipeline of `GET` + `PTTL` per key found.
//! Its cost is bounded by `n`, never by the number of keys held; a step may find none and still
//! return a cursor to continue from (0 once the walk is over), as `SCAN` does.

use crate::error::{Error, Result};
use crate::keys::{glob_escape, Keys};
use crate::link::connection::Conn;
use crate::scripts;

/// The largest `COUNT` a step may ask for.
pub const MAX_COUNT: usize = 1000;

/// One idempotency key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeldKey {
    /// The whole key, namespace included: what [`release`] takes.
    pub key: String,
    /// The queue of the jobs it deduplicates (the key names it; the worker is hashed away).
    pub queue: Option<String>,
    /// The jid of the job holding it.
    pub jid: String,
    /// Milliseconds left to live; -1 for a key without expiry.
    pub ttl_ms: i64,
}

/// One step of the walk: where the next starts (0 at the end) and the keys found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Step {
    pub cursor: u64,
    pub keys: Vec<HeldKey>,
}

/// The prefix every idempotency key starts with: `<namespace>duplicate:`.
fn prefix(keys: &Keys) -> String {
    format!("{}duplicate:", keys.namespace())
}

/// The `MATCH` pattern: every key, or those of one queue.
pub fn pattern(keys: &Keys, queue: Option<&str>) -> String {
    match queue {
        Some(q) => format!("{}{}:*", glob_escape(&prefix(keys)), glob_escape(q)),
        None => format!("{}*", glob_escape(&prefix(keys))),
    }
}

/// The queue a key names (`…duplicate:<queue>:<digest>`; queue names may hold colons, digests not).
pub fn queue_of<'a>(keys: &Keys, key: &'a str) -> Option<&'a str> {
    let rest = key.strip_prefix(prefix(keys).as_str())?;
    rest.rsplit_once(':').map(|(queue, _)| queue)
}

/// One step of the walk from `cursor` (0 to start), examining about `count` keys (1 to
/// [`MAX_COUNT`]), of `queue` only when given. Two round trips; none when the step found nothing.
pub async fn page(conn: &mut Conn, cursor: u64, count: usize, queue: Option<&str>) -> Result<Step> {
    if count == 0 || count > MAX_COUNT {
        return Err(Error::InvalidArgument(format!(
            "a deduplication key scan examines 1 to {MAX_COUNT} keys per step, {count} asked"
        )));
    }
    let pattern = pattern(conn.keys(), queue);
    let (next, found): (u64, Vec<String>) = conn
        .cmd(
            redis::cmd("SCAN")
                .arg(cursor)
                .arg("MATCH")
                .arg(&pattern)
                .arg("COUNT")
                .arg(count)
                .arg("TYPE")
                .arg("string"),
        )
        .await?;
    // `duplicate:a:*` also matches the keys of queue `a:b`: keep the queue's own only.
    let mut found = found;
    if let Some(q) = queue {
        found.retain(|key| queue_of(conn.keys(), key) == Some(q));
    }
    if found.is_empty() {
        return Ok(Step {
            cursor: next,
            keys: Vec::new(),
        });
    }
    let mut pipe = redis::pipe();
    for key in &found {
        pipe.cmd("GET").arg(key);
        pipe.cmd("PTTL").arg(key);
    }
    let replies: Vec<(Option<String>, i64)> = {
        let flat: Vec<redis::Value> = conn.pipe(&pipe).await?;
        let mut it = flat.into_iter();
        let mut out = Vec::with_capacity(found.len());
        while let (Some(jid), Some(ttl)) = (it.next(), it.next()) {
            out.push((
                redis::from_redis_value(jid)
                    .map_err(|e| Error::redis(format!("idempotency key value: {e}")))?,
                redis::from_redis_value(ttl)
                    .map_err(|e| Error::redis(format!("idempotency key PTTL: {e}")))?,
            ));
        }
        out
    };
    let keys = conn.keys().clone();
    let held = found
        .into_iter()
        .zip(replies)
        // Gone between the SCAN and the GET: released or expired meanwhile.
        .filter_map(|(key, (jid, ttl_ms))| {
            let jid = jid?;
            let queue = queue_of(&keys, &key).map(str::to_owned);
            Some(HeldKey {
                key,
                queue,
                jid,
                ttl_ms,
            })
        })
        .collect();
    Ok(Step {
        cursor: next,
        keys: held,
    })
}

/// Releases `key` (and its side hash), so the next push of its job is not dropped — only while job
/// `jid` holds it, when given. Whether it was released. `key` must be an idempotency key of this
/// namespace.
pub async fn release(conn: &mut Conn, key: &str, jid: Option<&str>) -> Result<bool> {
    if queue_of(conn.keys(), key).is_none() || key.ends_with(":meta") {
        return Err(Error::InvalidArgument(format!(
            "{key:?} is not an idempotency key (they look like {:?})",
            conn.keys().duplicate("QUEUE", "SHA256")
        )));
    }
    let mut inv = scripts::DEDUP_FORGET.prepare_invoke();
    inv.key(key)
        .key(Keys::duplicate_meta(key))
        .arg(jid.unwrap_or(""));
    let n: i64 = conn.script(&inv).await?;
    Ok(n > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_match_the_namespace_literally() {
        let ns = Keys::new("a*b:");
        assert_eq!(pattern(&ns, None), "a\\*b:duplicate:*");
        assert_eq!(pattern(&ns, Some("q[1]")), "a\\*b:duplicate:q\\[1\\]:*");
        assert_eq!(pattern(&Keys::new(""), None), "duplicate:*");
    }

    #[test]
    fn the_queue_is_what_lies_before_the_digest() {
        let k = Keys::new("resque:gitlab:");
        let key = k.duplicate("pipeline:processing", "ab12");
        assert_eq!(queue_of(&k, &key), Some("pipeline:processing"));
        assert_eq!(queue_of(&k, "resque:gitlab:duplicate:nodigest"), None);
        assert_eq!(queue_of(&k, "duplicate:q:ab12"), None);
    }
}
