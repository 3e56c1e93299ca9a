//! A job's outline: its JSON read once, as it is fetched, and where the top-level fields a
//! processor builds lie in it.
//!
//! A processor thread reads a job it runs itself with the GVL held, and everything it does there
//! keeps every other job thread of the process waiting. Most of that reading is checking: that the
//! whole JSON is one the binding's reader accepts (`plain_json`), and which keys it has. That part
//! needs no Ruby, so it is done here, where the fetch's reply is taken apart with the GVL released;
//! the processor then builds only the few values it uses, each from its own bytes
//! ([`plain_json::parse_at`]), and accepts exactly the JSON the whole reading would.
//!
//! Duplicated keys: the last one's place is kept, as the Hash keeps the last value; the marks
//! (`wal_locations`, `meta.*`, …) are set by any of them, as the Hash holds them by their presence.

use std::ops::Range;

use crate::plain_json::{self, Build};

/// Where a job's read fields lie in its JSON, and which of the fields a processor only looks for
/// it has. Made only for JSON the reader accepts whole, whose outermost value is an object.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Outline {
    pub args: Option<Range<usize>>,
    pub jid: Option<Range<usize>>,
    pub bid: Option<Range<usize>>,
    pub idempotency_key: Option<Range<usize>>,
    /// The `class` value as written (quotes included).
    pub class: Option<Range<usize>>,
    pub marks: Marks,
}

/// The top-level keys a processor looks for only by their presence (their values are not read).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Marks {
    /// `wal_locations`: the job's start reads the positions kept for its key.
    pub wal_locations: bool,
    pub duplicate_of: bool,
    pub expires_at: bool,
    /// A `wrapped` key (ActiveJob's class, which the metrics count the job under).
    pub wrapped: bool,
    /// A `display_class` key (the class a job's log lines show instead of `class`).
    pub display_class: bool,
    /// A `tags` key (shown in the job's log lines).
    pub tags: bool,
    /// A key starting with `meta.` (a worker context).
    pub meta: bool,
}

impl Marks {
    /// Notes `key`, a key of the outermost object, when it is one of the marks.
    pub fn note(&mut self, key: &[u8]) {
        match key {
            b"wal_locations" => self.wal_locations = true,
            b"duplicate-of" => self.duplicate_of = true,
            b"expires_at" => self.expires_at = true,
            b"wrapped" => self.wrapped = true,
            b"display_class" => self.display_class = true,
            b"tags" => self.tags = true,
            _ if key.starts_with(b"meta.") => self.meta = true,
            _ => {}
        }
    }
}

impl Outline {
    /// The outline of `raw`; `None` when the reader declines it or it is not an object.
    pub fn of(raw: &[u8]) -> Option<Outline> {
        let mut reading = Reading::default();
        plain_json::parse(raw, &mut reading)?;
        reading.object.then_some(reading.outline)
    }
}

/// Reads every value without building any, and notes where the outermost object's lie.
#[derive(Default)]
struct Reading {
    outline: Outline,
    object: bool,
}

impl Build for Reading {
    type Value = ();
    const USES_VALUES: bool = false;
    plain_json::build_nothing!();

    fn object(&mut self, depth: usize) {
        self.object |= depth == 1;
    }

    fn wants(&mut self, _key: &[u8], depth: usize) -> bool {
        depth != 1
    }

    fn skipped(&mut self, key: &[u8], at: Range<usize>, _depth: usize) {
        let outline = &mut self.outline;
        match key {
            b"args" => outline.args = Some(at),
            b"jid" => outline.jid = Some(at),
            b"bid" => outline.bid = Some(at),
            b"idempotency_key" => outline.idempotency_key = Some(at),
            b"class" => outline.class = Some(at),
            _ => outline.marks.note(key),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text<'r>(raw: &'r str, at: &Option<Range<usize>>) -> Option<&'r str> {
        at.clone().map(|at| &raw[at])
    }

    #[test]
    fn notes_where_the_read_fields_lie() {
        let raw = r#" { "class" : "W", "args":[1, {"jid":"inner"}] ,"jid":"j1","bid":null,
            "meta.user":"u","idempotency_key":"k","wrapped":"X","retry":true,"tags":["a"] } "#;
        let outline = Outline::of(raw.as_bytes()).expect("an outline");
        assert_eq!(text(raw, &outline.class), Some(r#""W""#));
        assert_eq!(text(raw, &outline.args), Some(r#"[1, {"jid":"inner"}]"#));
        assert_eq!(text(raw, &outline.jid), Some(r#""j1""#));
        assert_eq!(text(raw, &outline.bid), Some("null"));
        assert_eq!(text(raw, &outline.idempotency_key), Some(r#""k""#));
        assert!(outline.marks.meta && outline.marks.wrapped && outline.marks.tags);
        let marks = outline.marks;
        assert!(!(marks.wal_locations || marks.duplicate_of || marks.expires_at));
        assert!(!marks.display_class);
    }

    #[test]
    fn the_last_of_a_repeated_key_and_escaped_keys() {
        let raw = r#"{"jid":"a","j\u0069d":"b","jid":"c","wal_locations":{},"duplicate-of":"x"}"#;
        // A `\u` escape is declined by the reader, so the whole is.
        assert_eq!(Outline::of(raw.as_bytes()), None);
        let raw = r#"{"jid":"a","expires_at":1.5,"jid":"c","wal_locations":{},"duplicate-of":"x"}"#;
        let outline = Outline::of(raw.as_bytes()).expect("an outline");
        assert_eq!(text(raw, &outline.jid), Some(r#""c""#));
        let marks = outline.marks;
        assert!(marks.wal_locations && marks.duplicate_of && marks.expires_at);
        let raw = r#"{"cl\"ass":"W","class":"V"}"#;
        assert_eq!(
            text(raw, &Outline::of(raw.as_bytes()).expect("an outline").class),
            Some(r#""V""#)
        );
    }

    #[test]
    fn only_whole_objects_the_reader_accepts() {
        for raw in [
            "[]",
            r#""job""#,
            "1",
            r#"{"args":[1,]}"#,
            r#"{"args":[01]}"#,
            r#"{"a":1} x"#,
            "{",
        ] {
            assert_eq!(Outline::of(raw.as_bytes()), None, "{raw}");
        }
        assert_eq!(Outline::of(b"{}"), Some(Outline::default()));
    }

    #[test]
    fn a_noted_value_reads_alone_as_it_read_in_the_whole() {
        let raw = r#"{"args":[{"a":[1,2.5,"x\ny"]},null],"jid":"j\"1"}"#;
        let outline = Outline::of(raw.as_bytes()).expect("an outline");
        let args = &raw.as_bytes()[outline.args.expect("args")];
        assert!(plain_json::parse_at(args, 1, &mut Reading::default()).is_some());
        let jid = &raw.as_bytes()[outline.jid.expect("jid")];
        assert!(plain_json::parse_at(jid, 1, &mut Reading::default()).is_some());
    }
}
