//! The batch's part of settling a job: the acknowledgement packet of a finished job
//! (`batch_ack.lua`, unreplied, as `EVAL` so a `NOSCRIPT` can never be lost unseen), and the
//! prelude argument of a failure (`batch_fail.lua` + `fail.lua`, one script).

use redis::ScriptInvocation;

use crate::clock::{float_string, now_f64};
use crate::fetch::Unit;
use crate::keys::Keys;
use crate::retry::{Failure, Fate};
use crate::scripts;

use super::Member;

impl Member {
    /// The packet that acknowledges `unit` and counts it as succeeded (or its callback as run).
    pub fn ack_packet(&self, keys: &Keys, unit: &Unit) -> Vec<u8> {
        let batch = if self.bid.is_empty() {
            String::new()
        } else {
            keys.batch(&self.bid)
        };
        redis::cmd("EVAL")
            .arg(scripts::BATCH_ACK_SOURCE.as_str())
            .arg(2)
            .arg(&unit.working)
            .arg(keys.batch_checks())
            .arg(&unit.raw)
            .arg(batch)
            .arg(&self.jid)
            .arg(&self.bid)
            .arg(&self.callback)
            .arg(if self.failed_before { "1" } else { "0" })
            .get_packed_command()
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
