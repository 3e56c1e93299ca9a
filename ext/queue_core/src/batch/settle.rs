//! The batch's part of settling a job: the acknowledgement packet of a finished job (a `MULTI` of
//! the `LREM` and its marker for the checker, unreplied), and the prelude argument of a failure
//! (`batch_fail.lua` + `fail.lua`, one script).

use redis::ScriptInvocation;

use crate::clock::{float_string, now_f64};
use crate::fetch::Unit;
use crate::keys::Keys;
use crate::retry::{Failure, Fate};

use super::Member;

impl Member {
    /// The packet that acknowledges `unit` and leaves its marker for the checker, which counts it
    /// as succeeded (or its callback as run): `MULTI`, the `LREM`, an `LPUSH` of the marker onto `jq:batch-acks`, `EXEC`.
    /// Plain commands (no script: an `EVAL`'s fixed cost per ack was most of a batch's overhead);
    /// the marker is pushed even when the `LREM` took nothing (an ack written twice), and the
    /// checker counts each jid once.
    ///
    /// Written straight into one buffer (`resp.rs`): it is built once per job.
    pub fn ack_packet(&self, keys: &Keys, unit: &Unit) -> Vec<u8> {
        let acks = keys.batch_acks();
        let marker = (!self.bid.is_empty()).then(|| self.marker());
        let callback = (!self.callback.is_empty()).then(|| format!("d {}", self.callback));
        let lrem: [&[u8]; 4] = [b"LREM", unit.working.as_bytes(), b"-1", &unit.raw];
        let mut lpush: Vec<&[u8]> = vec![b"LPUSH", acks.as_bytes()];
        lpush.extend(marker.as_deref().map(str::as_bytes));
        lpush.extend(callback.as_deref().map(str::as_bytes));
        let mut out = Vec::with_capacity(crate::resp::size(&lrem) + crate::resp::size(&lpush) + 32);
        crate::resp::command(&mut out, &[b"MULTI"]);
        crate::resp::command(&mut out, &lrem);
        crate::resp::command(&mut out, &lpush);
        crate::resp::command(&mut out, &[b"EXEC"]);
        out
    }

    /// `s<n>:<bid><jid>` for a job that never failed, `r<n>:<bid><jid>` for one that did (only it
    /// can be among its batch's failures); `n` is the bid's length in bytes, so neither id needs
    /// escaping.
    fn marker(&self) -> String {
        let kind = if self.failed_before { 'r' } else { 's' };
        format!("{kind}{}:{}{}", self.bid.len(), self.bid, self.jid)
    }

    /// Whether a failure with this fate changes the batch: any failure of a job in a batch, and a
    /// callback job discarded (its callbacks count as run).
    pub fn counts_failure(&self, fate: &Fate) -> bool {
        !self.bid.is_empty() || matches!(fate, Fate::Discarded)
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
            "bid": self.bid,
            "jid": self.jid,
            "cb": self.callback,
            "fate": fate,
            "class": failure.map_or("InvalidJob", |f| f.error_class.as_str()),
            "message": failure.map_or("", |f| f.error_message.as_str()),
            "at": float_string(now_f64()),
        });
        inv.arg(spec.to_string());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The packet as the crate's pipeline writes it.
    fn crates_packet(member: &Member, keys: &Keys, unit: &Unit) -> Vec<u8> {
        let mut pipe = redis::pipe();
        pipe.atomic();
        pipe.cmd("LREM").arg(&*unit.working).arg(-1).arg(&unit.raw);
        let mut push = redis::cmd("LPUSH");
        push.arg(keys.batch_acks());
        if !member.bid.is_empty() {
            push.arg(member.marker());
        }
        if !member.callback.is_empty() {
            push.arg(format!("d {}", member.callback));
        }
        pipe.add_command(push);
        pipe.get_packed_pipeline()
    }

    #[test]
    fn the_ack_packet_is_the_crates_multi() {
        let keys = Keys::new("app");
        let unit = Unit {
            index: 0,
            queue: "default".into(),
            raw: br#"{"class":"W","args":[],"jid":"j1","bid":"b1"}"#.to_vec(),
            working: "jq:working:h:1:x:t1:default".into(),
            key_released: false,
        };
        for member in [
            Member::of(&unit.raw).expect("member"),
            Member {
                callback: "success:b1".into(),
                ..Member::default()
            },
        ] {
            assert_eq!(
                member.ack_packet(&keys, &unit),
                crates_packet(&member, &keys, &unit)
            );
        }
    }
}
