//! Reading a few top-level fields of a job's JSON in one pass over its bytes, without building the
//! job: what the per-job paths (log lines, metrics) need of every job they see. Keys nested in
//! `args` or anywhere below the top level never count.

/// One top-level key of a job and, when its value is a string, that string's raw bytes (between the
/// quotes, still escaped) and whether it holds an escape.
pub(crate) struct Field<'a> {
    pub key: &'a [u8],
    pub string: Option<(&'a [u8], bool)>,
}

/// The top-level keys of a JSON object, in order. Stops at malformed input (an unterminated string),
/// after which [`TopLevel::malformed`] is true.
pub(crate) struct TopLevel<'a> {
    raw: &'a [u8],
    i: usize,
    depth: usize,
    expect_key: bool,
    malformed: bool,
}

impl<'a> TopLevel<'a> {
    pub(crate) fn new(raw: &'a [u8]) -> TopLevel<'a> {
        TopLevel {
            raw,
            i: 0,
            depth: 0,
            expect_key: false,
            malformed: false,
        }
    }

    pub(crate) fn malformed(&self) -> bool {
        self.malformed
    }
}

impl<'a> Iterator for TopLevel<'a> {
    type Item = Field<'a>;

    fn next(&mut self) -> Option<Field<'a>> {
        let raw = self.raw;
        while self.i < raw.len() {
            let at = self.i;
            self.i += 1;
            match raw[at] {
                b'{' | b'[' => {
                    self.depth += 1;
                    self.expect_key = self.depth == 1 && raw[at] == b'{';
                }
                b'}' | b']' => self.depth = self.depth.saturating_sub(1),
                b',' => self.expect_key = self.depth == 1,
                b'"' => {
                    let Some(end) = string_end(raw, at + 1) else {
                        self.malformed = true;
                        self.i = raw.len();
                        return None;
                    };
                    self.i = end + 1;
                    if std::mem::take(&mut self.expect_key) {
                        let value = string_value(raw, end + 1);
                        // A value that is a string was read to its end: go on after it.
                        if let Some((_, _, value_end)) = value {
                            self.i = value_end + 1;
                        }
                        return Some(Field {
                            key: &raw[at + 1..end],
                            string: value.map(|(text, escaped, _)| (text, escaped)),
                        });
                    }
                }
                _ => {}
            }
        }
        None
    }
}

/// Where the string whose contents start at `from` ends (its closing quote). Passes over a plain
/// run a word at a time, then jumps from one quote or backslash to the next (`memchr2`): a job's
/// bytes are mostly strings, and this runs for every job (the metrics' class, batch membership, job
/// lines).
pub(crate) fn string_end(raw: &[u8], from: usize) -> Option<usize> {
    string_end_escaped(raw, from).map(|(end, _)| end)
}

/// [`string_end`], and whether the string holds an escape.
fn string_end_escaped(raw: &[u8], from: usize) -> Option<(usize, bool)> {
    // Most strings are plain ASCII to their quote (`plain_json::plain_run`, a word at a time).
    let mut i = from + crate::plain_json::plain_run(raw.get(from..)?);
    if raw.get(i) == Some(&b'"') {
        return Some((i, false));
    }
    let mut escaped = false;
    while let Some(found) = raw
        .get(i..)
        .and_then(|rest| memchr::memchr2(b'"', b'\\', rest))
    {
        let at = i + found;
        if raw[at] == b'"' {
            return Some((at, escaped));
        }
        escaped = true;
        i = at + 2;
    }
    None
}

/// The string value after a key's closing quote (`:"…"` from `from`), whether it has escapes, and
/// where it ends (its closing quote); `None` when the value is not a string.
fn string_value(raw: &[u8], from: usize) -> Option<(&[u8], bool, usize)> {
    let rest = raw.get(from..)?;
    let colon = rest.iter().position(|b| !b.is_ascii_whitespace())?;
    if rest[colon] != b':' {
        return None;
    }
    let after = colon + 1;
    let quote = after
        + rest[after..]
            .iter()
            .position(|b| !b.is_ascii_whitespace())?;
    if rest[quote] != b'"' {
        return None;
    }
    let start = from + quote + 1;
    let (end, escaped) = string_end_escaped(raw, start)?;
    Some((&raw[start..end], escaped, end))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_top_level_keys_with_their_string_values() {
        let raw = br#"{"args":[{"class":"Inner"}],"class" : "Outer","n":1,"q":"a\"b","jid":"x"}"#;
        type Seen<'a> = (&'a [u8], Option<(&'a [u8], bool)>);
        let fields: Vec<Seen> = TopLevel::new(raw).map(|f| (f.key, f.string)).collect();
        assert_eq!(
            fields,
            vec![
                (&b"args"[..], None),
                (&b"class"[..], Some((&b"Outer"[..], false))),
                (&b"n"[..], None),
                (&b"q"[..], Some((&br#"a\"b"#[..], true))),
                (&b"jid"[..], Some((&b"x"[..], false))),
            ]
        );
        for (text, end) in [
            (&br#""ab""#[..], Some(3)),
            (br#""a\"b""#, Some(5)),
            (br#""a\\\\"b"#, Some(6)),
            (br#""ab\"#, None),
            (br#""ab\""#, None),
            (br#""ab"#, None),
        ] {
            assert_eq!(
                string_end(text, 1),
                end,
                "{}",
                String::from_utf8_lossy(text)
            );
        }
        // A string value is skipped whole, whatever it holds.
        let tricky = br#"{"s":"}],{\"class\":\"No\",","class":"Yes"}"#;
        let keys: Vec<&[u8]> = TopLevel::new(tricky).map(|f| f.key).collect();
        assert_eq!(keys, vec![&b"s"[..], &b"class"[..]]);
        let mut broken = TopLevel::new(br#"{"class":"unterminated"#);
        assert!(broken
            .next()
            .is_some_and(|f| f.key == b"class" && f.string.is_none()));
        assert!(broken.next().is_none());
        assert!(broken.malformed());
    }
}
