//! Whether a job belongs to a batch, read from its top-level keys in one pass (no parse): `bid` for
//! a job of a batch, `jq_cb` (`<event>:<bid>`) for a batch's callback job.

use std::sync::LazyLock;

use memchr::memmem::Finder;

use crate::job_json::TopLevel;

/// What the settle paths need of a job in a batch. Made for every job of a batch as it is taken,
/// so its three ids share one allocation.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Member {
    /// The bid, the jid and the callback tag, one after the other.
    ids: String,
    bid_end: usize,
    jid_end: usize,
    /// It has a `retry_count`: it failed before (only such a job can be among its batch's failures).
    pub failed_before: bool,
}

impl Member {
    /// `None` for a job in no batch (the common case costs one substring search).
    pub fn of(raw: &[u8]) -> Option<Member> {
        // Built once: `memmem::find` builds its searcher on every call, and this runs for every
        // job taken.
        static BID: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new(b"\"bid\""));
        static CALLBACK: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new(b"\"jq_cb\""));
        if BID.find(raw).is_none() && CALLBACK.find(raw).is_none() {
            return None;
        }
        let mut found: [&[u8]; 3] = [b"", b"", b""];
        let mut failed_before = false;
        let mut escaped = false;
        let mut fields = TopLevel::new(raw);
        for field in fields.by_ref() {
            let slot = match field.key {
                b"retry_count" => {
                    failed_before = true;
                    continue;
                }
                b"bid" => 0,
                b"jid" => 1,
                b"jq_cb" => 2,
                _ => continue,
            };
            if let Some((value, has_escape)) = field.string {
                escaped |= has_escape;
                found[slot] = value;
            }
        }
        if fields.malformed() || !escaped && found[0].is_empty() && found[2].is_empty() {
            return None;
        }
        let member = if escaped {
            let value: serde_json::Value = serde_json::from_slice(raw).ok()?;
            let get = |k: &str| value.get(k).and_then(|v| v.as_str()).unwrap_or("");
            Member::new(
                get("bid"),
                get("jid"),
                get("jq_cb"),
                value.get("retry_count").is_some(),
            )
        } else {
            let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
            match found.map(std::str::from_utf8) {
                [Ok(bid), Ok(jid), Ok(callback)] => Member::new(bid, jid, callback, failed_before),
                _ => Member::new(
                    &text(found[0]),
                    &text(found[1]),
                    &text(found[2]),
                    failed_before,
                ),
            }
        };
        (!member.bid().is_empty() || !member.callback().is_empty()).then_some(member)
    }

    /// A member from its parts (`callback` empty for a job of a batch, `bid` empty for a callback
    /// job).
    pub fn new(bid: &str, jid: &str, callback: &str, failed_before: bool) -> Member {
        let mut ids = String::with_capacity(bid.len() + jid.len() + callback.len());
        ids.push_str(bid);
        ids.push_str(jid);
        ids.push_str(callback);
        Member {
            ids,
            bid_end: bid.len(),
            jid_end: bid.len() + jid.len(),
            failed_before,
        }
    }

    /// The batch it belongs to, empty for a callback job.
    pub fn bid(&self) -> &str {
        &self.ids[..self.bid_end]
    }

    pub fn jid(&self) -> &str {
        &self.ids[self.bid_end..self.jid_end]
    }

    /// `<event>:<bid>` of a callback job, empty otherwise.
    pub fn callback(&self) -> &str {
        &self.ids[self.jid_end..]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_top_level_bid_makes_a_member() {
        let m = Member::of(br#"{"class":"W","args":[],"jid":"j1","bid":"b1"}"#).expect("member");
        assert_eq!((m.bid(), m.jid()), ("b1", "j1"));
        assert!(m.callback().is_empty());
        assert!(!m.failed_before);
        let retried =
            Member::of(br#"{"class":"W","args":[],"jid":"j1","bid":"b1","retry_count":0}"#);
        assert!(retried.expect("member").failed_before);
    }

    #[test]
    fn a_bid_inside_the_arguments_does_not() {
        assert_eq!(
            Member::of(br#"{"class":"W","args":[{"bid":"x"}],"jid":"j"}"#),
            None
        );
        assert_eq!(Member::of(br#"{"class":"W","args":[],"jid":"j"}"#), None);
    }

    #[test]
    fn escaped_ids_are_read_as_json_reads_them() {
        let m =
            Member::of(br#"{"class":"W","jid":"j\u0031","bid":"b\/1","args":[]}"#).expect("member");
        assert_eq!((m.bid(), m.jid(), m.callback()), ("b/1", "j1", ""));
        // A later duplicate key wins, as with `JSON.parse`.
        let m = Member::of(br#"{"bid":"old","jid":"j","bid":"new"}"#).expect("member");
        assert_eq!(m.bid(), "new");
        assert_eq!(Member::of(br#"{"bid":"","jid":"j"}"#), None);
    }

    #[test]
    fn the_ids_share_one_string() {
        let m = Member::new("b1", "j22", "success:b0", true);
        assert_eq!(
            (m.bid(), m.jid(), m.callback(), m.failed_before),
            ("b1", "j22", "success:b0", true)
        );
        assert_eq!(m.ids.capacity(), "b1j22success:b0".len());
    }

    #[test]
    fn a_callback_job_is_a_member_by_its_tag() {
        let m = Member::of(br#"{"class":"C","args":[],"jid":"j","jq_cb":"complete:b"}"#)
            .expect("member");
        assert_eq!(m.callback(), "complete:b");
        assert!(m.bid().is_empty());
    }
}
