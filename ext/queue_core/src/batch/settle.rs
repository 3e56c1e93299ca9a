//! The batch's part of settling a job: the acknowledgement packet of a finished job (its record
//! for the checker, then the `LREM`, unreplied), and the prelude argument of a failure
//! (`batch_fail.lua` + `fail.lua`, one script).

use redis::ScriptInvocation;

use crate::clock::{float_string, now_f64};
use crate::fetch::calls::AckHead;
use crate::fetch::Unit;
use crate::keys::Keys;
use crate::retry::{Failure, Fate};

use super::Member;

impl Member {
    /// The packet that records `unit` for the checker, which counts it as succeeded (or its
    /// callback as run), and then acknowledges it. Plain commands, no `MULTI`: for a job that never
    /// failed (the common case) `SADD <bid>:ok <jid>`, `SADD jq:batch-dirty <bid>`, the `LREM`; for
    /// one that failed before, or a callback job, an `LPUSH` of its marker onto `jq:batch-news`
    /// and the `LREM`.
    ///
    /// The record goes first: a server killed after it and before the `LREM` leaves the job in its
    /// working list, so recovery runs it again, and the second ack finds its jid already recorded:
    /// counted once. The other way round a kill would lose the count. The set is what makes an ack
    /// written twice (a resend) or late (a job recovery requeued from a server taken for dead while
    /// it still ran it) count once: the checker counts how far the set grew, not the acks.
    ///
    /// Without `mark`, the `SADD jq:batch-dirty` is left out: the fetcher owes it, and writes it
    /// after the acks of the same batch that follow on its connection (`Fetcher`'s `owed_mark`).
    ///
    /// Written straight into `out` (`resp.rs`): it is built once per job. The record's command
    /// up to the jid is the same for every job of a batch, and comes from `prefix`, which keeps it
    /// for the last batch it was asked for.
    pub fn ack_packet(
        &self,
        out: &mut Vec<u8>,
        keys: &Keys,
        unit: &Unit,
        mark: bool,
        prefix: &mut OkPrefix,
        head: &mut AckHead,
    ) {
        out.reserve(unit.raw.len() + unit.working.len() + 160);
        let mut markers: Vec<Vec<u8>> = Vec::new();
        if !self.bid().is_empty() {
            if self.failed_before {
                markers.push(self.marker().into_bytes());
            } else {
                out.extend_from_slice(prefix.of(keys, self.bid()));
                arg_of_parts(out, &[self.jid().as_bytes()]);
                if mark {
                    mark_of_parts(out, keys.namespace().as_bytes(), self.bid().as_bytes());
                }
            }
        }
        if !self.callback().is_empty() {
            markers.push(format!("d {}", self.callback()).into_bytes());
        }
        if !markers.is_empty() {
            let news = keys.batch_news();
            let mut lpush: Vec<&[u8]> = vec![b"LPUSH", news.as_bytes()];
            lpush.extend(markers.iter().map(Vec::as_slice));
            crate::resp::command(out, &lpush);
        }
        crate::fetch::calls::ack_command(out, head, unit);
    }

    /// How many commands [`Member::ack_packet`] writes (for a reader of their replies).
    pub fn ack_commands(&self, mark: bool) -> usize {
        let recorded = self.marks_dirty();
        let marked = self.failed_before && !self.bid().is_empty() || !self.callback().is_empty();
        1 + usize::from(recorded) * (1 + usize::from(mark)) + usize::from(marked)
    }

    /// Whether its ack adds its jid to `<bid>:ok` and marks the bid dirty: a job of a batch that
    /// never failed. Only such an ack may leave its mark owed ([`Member::ack_packet`]).
    pub fn marks_dirty(&self) -> bool {
        !self.bid().is_empty() && !self.failed_before
    }

    /// `q<n>:<bid><jid>`, the marker of a job that failed before: the checker records it and takes
    /// it off the failures. `n` is the bid's length in bytes, so neither id needs escaping.
    fn marker(&self) -> String {
        format!("q{}:{}{}", self.bid().len(), self.bid(), self.jid())
    }

    /// Whether a failure with this fate changes the batch: any failure of a job in a batch, and a
    /// callback job discarded (its callbacks count as run).
    pub fn counts_failure(&self, fate: &Fate) -> bool {
        !self.bid().is_empty() || matches!(fate, Fate::Discarded)
    }

    /// Adds the batch's argument (the last ARGV) to a `BATCH_FAIL` invocation.
    pub fn extend_fail(
        &self,
        inv: &mut ScriptInvocation<'static>,
        keys: &Keys,
        fate: &Fate,
        failure: Option<&Failure>,
    ) {
        let fate = match fate {
            Fate::Retry { .. } => "retry",
            Fate::Discarded => "ok",
            Fate::Exhausted { .. } | Fate::NoRetry => "dead",
        };
        let spec = serde_json::json!({
            "ns": keys.namespace(),
            "bid": self.bid(),
            "jid": self.jid(),
            "cb": self.callback(),
            "fate": fate,
            "class": failure.map_or("InvalidJob", |f| f.error_class.as_str()),
            "message": failure.map_or("", |f| f.error_message.as_str()),
            "at": float_string(now_f64()),
        });
        inv.arg(spec.to_string());
    }
}

/// `SADD <bid>:ok` of a batch's success record up to its last argument, the jid: the same bytes for
/// every job of the batch, kept by a fetcher for the batch its jobs come from, so that an ack
/// appends them and the jid instead of writing the key in parts.
#[derive(Debug, Default)]
pub struct OkPrefix {
    bid: String,
    bytes: Vec<u8>,
}

impl OkPrefix {
    /// The prefix for `bid`'s record, made again when the batch changed.
    pub fn of(&mut self, keys: &Keys, bid: &str) -> &[u8] {
        if self.bytes.is_empty() || self.bid != bid {
            self.bid.clear();
            self.bid.push_str(bid);
            self.bytes.clear();
            let ns = keys.namespace().as_bytes();
            head(&mut self.bytes, 3);
            arg_of_parts(&mut self.bytes, &[b"SADD"]);
            arg_of_parts(&mut self.bytes, &[ns, b"jq:batch:", bid.as_bytes(), b":ok"]);
        }
        &self.bytes
    }
}

/// `SADD jq:batch-dirty <bid>`: the mark an ack owed, written on its own.
pub fn mark_packet(keys: &Keys, bid: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(bid.len() + 64);
    mark_of_parts(&mut out, keys.namespace().as_bytes(), bid.as_bytes());
    out
}

fn mark_of_parts(out: &mut Vec<u8>, ns: &[u8], bid: &[u8]) {
    command_of_parts(out, &[&[b"SADD"], &[ns, b"jq:batch-dirty"], &[bid]]);
}

/// Appends a command as `resp::command` writes it, each argument the concatenation of its parts.
fn command_of_parts(out: &mut Vec<u8>, args: &[&[&[u8]]]) {
    head(out, args.len());
    for parts in args {
        arg_of_parts(out, parts);
    }
}

/// A command's header: how many arguments follow.
fn head(out: &mut Vec<u8>, args: usize) {
    out.push(b'*');
    out.extend_from_slice(itoa::Buffer::new().format(args).as_bytes());
    out.extend_from_slice(b"\r\n");
}

/// One argument, the concatenation of its parts.
fn arg_of_parts(out: &mut Vec<u8>, parts: &[&[u8]]) {
    let len: usize = parts.iter().map(|p| p.len()).sum();
    out.push(b'$');
    out.extend_from_slice(itoa::Buffer::new().format(len).as_bytes());
    out.extend_from_slice(b"\r\n");
    for part in parts {
        out.extend_from_slice(part);
    }
    out.extend_from_slice(b"\r\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The packet as the crate's pipeline writes it.
    fn crates_packet(member: &Member, keys: &Keys, unit: &Unit, mark: bool) -> Vec<u8> {
        let mut pipe = redis::pipe();
        let mut push = redis::cmd("LPUSH");
        push.arg(keys.batch_news());
        let mut marked = false;
        if !member.bid().is_empty() {
            if member.failed_before {
                push.arg(member.marker());
                marked = true;
            } else {
                pipe.cmd("SADD")
                    .arg(keys.batch_ok(member.bid()))
                    .arg(member.jid());
                if mark {
                    pipe.cmd("SADD").arg(keys.batch_dirty()).arg(member.bid());
                }
            }
        }
        if !member.callback().is_empty() {
            push.arg(format!("d {}", member.callback()));
            marked = true;
        }
        if marked {
            pipe.add_command(push);
        }
        pipe.cmd("LREM").arg(&*unit.working).arg(-1).arg(&unit.raw);
        pipe.get_packed_pipeline()
    }

    #[test]
    fn the_ack_packet_is_the_crates_pipeline() {
        let keys = Keys::new("app");
        let unit = Unit::new(
            0,
            "default".into(),
            br#"{"class":"W","args":[],"jid":"j1","bid":"b1"}"#.to_vec(),
            "jq:working:h:1:x:t1:default".into(),
        );
        let plain = Member::of(&unit.raw).expect("member");
        let retried = Member::new("b1", "j1", "", true);
        let callback = Member::new("", "", "success:b1", false);
        let other = Member::new("b22", "j2", "", false);
        // One prefix for them all, as a fetcher keeps one: it follows the batch asked for.
        let mut prefix = OkPrefix::default();
        for member in [&plain, &retried, &other, &callback, &plain] {
            for mark in [true, false] {
                let mut packet = Vec::new();
                member.ack_packet(
                    &mut packet,
                    &keys,
                    &unit,
                    mark,
                    &mut prefix,
                    &mut AckHead::default(),
                );
                assert_eq!(packet, crates_packet(member, &keys, &unit, mark));
            }
        }
        assert_eq!(retried.marker(), "q2:b1j1");
        let commands: Vec<usize> = [&plain, &retried, &callback]
            .iter()
            .map(|m| m.ack_commands(true))
            .collect();
        assert_eq!(commands, vec![3, 2, 2]);
        assert_eq!(plain.ack_commands(false), 2);
        assert_eq!(retried.ack_commands(false), 2);
        let mut pipe = redis::pipe();
        pipe.cmd("SADD").arg(keys.batch_dirty()).arg("b1");
        assert_eq!(mark_packet(&keys, "b1"), pipe.get_packed_pipeline());
        let both = Member::new("b1", "j1", "success:b0", false);
        let mut packet = Vec::new();
        both.ack_packet(
            &mut packet,
            &keys,
            &unit,
            true,
            &mut prefix,
            &mut AckHead::default(),
        );
        assert_eq!(packet, crates_packet(&both, &keys, &unit, true));
        assert_eq!(both.ack_commands(true), 4);
    }
}
