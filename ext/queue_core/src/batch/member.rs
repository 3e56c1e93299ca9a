//! Whether a job belongs to a batch, read from its top-level keys in one pass (no parse): `bid` for
//! a job of a batch, `jq_cb` (`<event>:<bid>`) for a batch's callback job.

use std::sync::LazyLock;

use memchr::memmem::Finder;

use crate::job_json::TopLevel;

/// What the settle paths need of a job in a batch.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Member {
    /// The batch it belongs to, empty for a callback job.
    pub bid: String,
    pub jid: String,
    /// `<event>:<bid>` of a callback job, empty otherwise.
    pub callback: String,
    /// It has a `retry_count`: it failed before (only such a job can be among its batch's failures).
    pub failed_before: bool,
}

impl Member {
    /// `None` for a job in no batch (the common case costs one substring search).
    pub fn of(raw: &[u8]) -> Option<Member> {
        // Built once: `memmem::find` builds its searcher on every call, and this runs for every ack.
        static BID: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new(b"\"bid\""));
        static CALLBACK: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new(b"\"jq_cb\""));
        if BID.find(raw).is_none() && CALLBACK.find(raw).is_none() {
            return None;
        }
        let mut member = Member::default();
        let mut escaped = false;
        let mut fields = TopLevel::new(raw);
        for field in fields.by_ref() {
            let slot = match field.key {
                b"retry_count" => {
                    member.failed_before = true;
                    continue;
                }
                b"bid" => &mut member.bid,
                b"jid" => &mut member.jid,
                b"jq_cb" => &mut member.callback,
                _ => continue,
            };
            if let Some((value, has_escape)) = field.string {
                escaped |= has_escape;
                *slot = match std::str::from_utf8(value) {
                    Ok(text) => text.to_owned(),
                    Err(_) => String::from_utf8_lossy(value).into_owned(),
                };
            }
        }
        if fields.malformed() {
            return None;
        }
        if escaped {
            let value: serde_json::Value = serde_json::from_slice(raw).ok()?;
            let get = |k: &str| {
                value
                    .get(k)
                    .and_then(|v| v.as_str())
                    .unwrap_or("")
                    .to_owned()
            };
            member = Member {
                bid: get("bid"),
                jid: get("jid"),
                callback: get("jq_cb"),
                failed_before: value.get("retry_count").is_some(),
            };
        }
        (!member.bid.is_empty() || !member.callback.is_empty()).then_some(member)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_top_level_bid_makes_a_member() {
        let m = Member::of(br#"{"class":"W","args":[],"jid":"j1","bid":"b1"}"#).expect("member");
        assert_eq!((m.bid.as_str(), m.jid.as_str()), ("b1", "j1"));
        assert!(m.callback.is_empty());
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
    fn a_callback_job_is_a_member_by_its_tag() {
        let m = Member::of(br#"{"class":"C","args":[],"jid":"j","jq_cb":"complete:b"}"#)
            .expect("member");
        assert_eq!(m.callback, "complete:b");
        assert!(m.bid.is_empty());
    }
}
