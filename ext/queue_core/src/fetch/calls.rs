//! The Redis calls of fetching: take a batch (handing unstarted jobs back when a higher queue has
//! work), acknowledge a finished job, claim a batch whose reply was lost, put jobs back.
//!
//! Each call is built here once and sent on whichever connection the caller has: a fetcher's
//! synchronous one ([`crate::link::blocking::SyncConn`]) or a background task's async [`Conn`].

use std::sync::Arc;

use redis::{ScriptInvocation, Value};

use crate::clock::utc_date;
use crate::error::{Error, Result};
use crate::keys::{Keys, STATS_TTL_SECS};
use crate::link::blocking::SyncConn;
use crate::link::connection::Conn;
use crate::scripts;

use super::{FetchShared, Unit};

/// One `fetch.lua` call.
#[derive(Debug, Clone, Copy)]
pub struct FetchRequest<'a> {
    /// Queues to try, in order, each with the most jobs to take from it.
    pub queues: &'a [(usize, usize)],
    /// Unstarted jobs to hand back to their queues if the call takes anything.
    pub returns: &'a [Unit],
    /// Acknowledged jobs not yet counted in `stat:processed`.
    pub counted: u64,
    /// This fetcher's field in the fetch marks, and the call's token.
    pub mark: (&'a str, u64),
}

pub fn fetch_invocation(
    shared: &FetchShared,
    working: &[String],
    req: &FetchRequest<'_>,
) -> ScriptInvocation<'static> {
    let keys = shared.redis.keys();
    let mut inv = scripts::FETCH.prepare_invoke();
    inv.key(keys.stat_processed())
        .key(keys.stat_processed_on(&utc_date()))
        .key(keys.fetch_marks(&shared.identity))
        .key(keys.paused());
    for &(q, _) in req.queues {
        inv.key(keys.queue(shared.order.name(q))).key(&working[q]);
    }
    for r in req.returns {
        inv.key(&*r.working).key(keys.queue(&r.queue));
    }
    inv.arg(shared.concurrency)
        .arg(req.queues.len())
        .arg(req.counted)
        .arg(STATS_TTL_SECS)
        .arg(req.mark.0)
        .arg(req.mark.1);
    for &(_, most) in req.queues {
        inv.arg(most);
    }
    for &(q, _) in req.queues {
        inv.arg(shared.order.name(q));
    }
    for r in req.returns {
        inv.arg(&r.raw);
    }
    inv
}

/// The jobs a fetch took, oldest first: the reply is `{}` or `{pair index, job, job, …}`.
pub fn fetched_units(
    shared: &FetchShared,
    working: &[String],
    req: &FetchRequest<'_>,
    reply: Vec<Value>,
) -> Result<Vec<Unit>> {
    let mut items = reply.into_iter();
    let Some(Value::Int(pair)) = items.next() else {
        return Ok(Vec::new());
    };
    let index = usize::try_from(pair - 1)
        .ok()
        .and_then(|p| req.queues.get(p))
        .map(|&(q, _)| q)
        .ok_or_else(|| Error::redis(format!("fetch returned unknown queue pair {pair}")))?;
    let queue: Arc<str> = shared.order.name(index).into();
    let list: Arc<str> = working[index].as_str().into();
    Ok(items
        .filter_map(|v| match v {
            Value::BulkString(raw) => Some(Unit::new(index, queue.clone(), raw, list.clone())),
            _ => None,
        })
        .collect())
}

/// The bytes that acknowledge a finished job: `LREM` from its working list, written without reading a
/// reply (the fetcher's connection switches replies off: `link/reply_mode.rs`), so the fetcher writes
/// it and goes on without waiting. Redis runs it before anything the fetcher sends later on the same
/// connection.
/// Appended to `out` (`resp.rs`), the fetcher's kept packet buffer: the command's bytes up to the job
/// are kept in `head` for the working list they name, so a job's ack writes only its own.
pub fn ack_command(out: &mut Vec<u8>, head: &mut AckHead, unit: &Unit) {
    out.reserve(unit.working.len() + crate::resp::bulk_len(unit.raw.len()) + 40);
    out.extend_from_slice(head.of(&unit.working));
    crate::resp::bulk(out, &[&unit.raw]);
}

/// The bytes of an ack before its job (`*4`, `LREM`, the working list, `-1`), for the working list
/// of the last ack: a fetcher's jobs come from a few lists, most often one.
#[derive(Debug, Default)]
pub struct AckHead {
    working: String,
    bytes: Vec<u8>,
}

impl AckHead {
    /// The head for `working`, made again when the list changed.
    pub fn of(&mut self, working: &str) -> &[u8] {
        if self.bytes.is_empty() || self.working != working {
            self.working.clear();
            self.working.push_str(working);
            self.bytes.clear();
            crate::resp::array(&mut self.bytes, 4);
            crate::resp::bulk(&mut self.bytes, &[b"LREM"]);
            crate::resp::bulk(&mut self.bytes, &[working.as_bytes()]);
            crate::resp::bulk(&mut self.bytes, &[b"-1"]);
        }
        &self.bytes
    }
}

/// What became of a fetch call whose reply was lost.
#[derive(Debug, Default)]
pub struct LostCall {
    /// Redis ran it: its stats count was applied (and its returns handed back if it took a batch).
    pub ran: bool,
    /// The batch it moved into this fetcher's working list, oldest first; empty if none.
    pub batch: Vec<Unit>,
}

/// Finds out whether the fetch call with `token` ran, from the mark every call leaves, and claims the
/// batch it took: nobody holds those jobs, since the reply was lost. They are the leftmost of the
/// working list (only this fetcher's fetches push there, and nothing else knows them to remove them).
pub fn claim_lost_batch(
    conn: &mut SyncConn,
    shared: &FetchShared,
    tid: &str,
    token: u64,
    queues: &[(usize, usize)],
    working: &[String],
) -> Result<LostCall> {
    let marks = shared.redis.keys().fetch_marks(&shared.identity);
    let mark: Option<String> = conn.cmd(redis::cmd("HGET").arg(&marks).arg(tid))?;
    let Some((marked, pair, count)) = mark.as_deref().and_then(parse_mark) else {
        return Ok(LostCall::default());
    };
    if marked != token {
        return Ok(LostCall::default());
    }
    let index = pair
        .checked_sub(1)
        .and_then(|p| queues.get(p))
        .map(|&(q, _)| q);
    let Some(index) = index.filter(|_| count > 0) else {
        return Ok(LostCall {
            ran: true,
            batch: Vec::new(),
        });
    };
    let mut raws: Vec<Vec<u8>> = conn.cmd(
        redis::cmd("LRANGE")
            .arg(&working[index])
            .arg(0)
            .arg(count - 1),
    )?;
    raws.reverse();
    let queue: Arc<str> = shared.order.name(index).into();
    let list: Arc<str> = working[index].as_str().into();
    tracing::warn!(
        queue = %queue,
        jobs = raws.len(),
        "a fetch's reply was lost; its jobs are taken from the working list"
    );
    Ok(LostCall {
        ran: true,
        batch: raws
            .into_iter()
            .map(|raw| Unit::new(index, queue.clone(), raw, list.clone()))
            .collect(),
    })
}

/// A fetch mark: `"<token> <pair> <count>"`.
fn parse_mark(mark: &str) -> Option<(u64, usize, usize)> {
    let mut fields = mark.split(' ');
    let token = fields.next()?.parse().ok()?;
    let pair = fields.next()?.parse().ok()?;
    let count = fields.next()?.parse().ok()?;
    Some((token, pair, count))
}

/// The `requeue.lua` calls that put `units` back on the right of their queues (they run next), one
/// per working list and queue. A job goes back only if its working list still holds it.
pub fn requeue_invocations(keys: &Keys, units: &[Unit]) -> Vec<ScriptInvocation<'static>> {
    let mut groups: Vec<(&str, &str, Vec<&[u8]>)> = Vec::new();
    for u in units {
        match groups
            .iter_mut()
            .find(|(w, q, _)| *w == &*u.working && *q == &*u.queue)
        {
            Some(g) => g.2.push(&u.raw),
            None => groups.push((&u.working, &u.queue, vec![&u.raw])),
        }
    }
    groups
        .into_iter()
        .map(|(working, queue, raws)| {
            let mut inv = scripts::REQUEUE.prepare_invoke();
            inv.key(working)
                .key(keys.queue(queue))
                .key(keys.queues())
                .arg(queue);
            for raw in raws {
                inv.arg(raw);
            }
            inv
        })
        .collect()
}

/// Puts jobs back on their queues from a background task. Returns how many moved.
pub async fn requeue(conn: &mut Conn, units: &[Unit]) -> Result<usize> {
    let mut moved = 0;
    for inv in requeue_invocations(&conn.keys().clone(), units) {
        moved += conn.script::<usize>(&inv).await?;
    }
    Ok(moved)
}

/// Puts jobs back on their queues from a fetcher. Returns how many moved.
pub fn requeue_sync(conn: &mut SyncConn, units: &[Unit]) -> Result<usize> {
    let mut moved = 0;
    for inv in requeue_invocations(&conn.keys().clone(), units) {
        moved += conn.script::<usize>(&inv)?;
    }
    Ok(moved)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marks_parse_or_are_ignored() {
        assert_eq!(parse_mark("17 2 5"), Some((17, 2, 5)));
        assert_eq!(parse_mark("17 2"), None);
        assert_eq!(parse_mark("x 2 5"), None);
        assert_eq!(parse_mark(""), None);
    }

    #[test]
    fn an_ack_is_an_lrem_from_the_tail() {
        let unit = Unit::new(
            0,
            "default".into(),
            b"{\"jid\":\"a\"}".to_vec(),
            "jq:working:h:1:x:t1:default".into(),
        );
        let mut packet = b"kept".to_vec();
        let mut head = AckHead::default();
        ack_command(&mut packet, &mut head, &unit);
        let text = String::from_utf8(packet.split_off(4)).expect("utf-8");
        assert_eq!(
            text,
            "*4\r\n$4\r\nLREM\r\n$27\r\njq:working:h:1:x:t1:default\r\n$2\r\n-1\r\n$11\r\n{\"jid\":\"a\"}\r\n"
        );
    }

    #[test]
    fn a_kept_head_follows_the_working_list_of_each_ack() {
        let lists = [
            "jq:working:h:1:x:t1:default",
            "jq:working:h:1:x:t1:low",
            "w",
        ];
        let mut head = AckHead::default();
        for (n, working) in lists.iter().cycle().take(7).enumerate() {
            let unit = Unit::new(
                0,
                "q".into(),
                format!("{{\"n\":{n}}}").into_bytes(),
                (*working).into(),
            );
            let mut kept = Vec::new();
            ack_command(&mut kept, &mut head, &unit);
            let mut general = Vec::new();
            crate::resp::command(
                &mut general,
                &[b"LREM", working.as_bytes(), b"-1", &unit.raw],
            );
            assert_eq!(kept, general, "ack {n}");
        }
    }

    #[test]
    fn requeues_are_grouped_by_working_list_and_queue() {
        let keys = Keys::new("");
        let unit = |w: &str, q: &str, raw: &[u8]| Unit::new(0, q.into(), raw.to_vec(), w.into());
        let units = [
            unit("w1", "a", b"1"),
            unit("w2", "a", b"2"),
            unit("w1", "a", b"3"),
        ];
        assert_eq!(requeue_invocations(&keys, &units).len(), 2);
        assert!(requeue_invocations(&keys, &[]).is_empty());
    }
}
