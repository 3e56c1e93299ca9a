//! JSON read as Ruby's json gem reads it (`JSON.parse` with its defaults, json 2.6), for the part of
//! JSON where the two cannot differ; everything else is declined, to be parsed by Ruby.
//!
//! A server builds each job's Hash with this reader instead of `JSON.parse` (the binding's
//! `job_hash.rs`), and a job's arguments must never change on the way. So it accepts only what it
//! reads exactly as the gem does, and answers `None` for anything else:
//!
//! - strings of valid UTF-8 without control characters, with the escapes `\" \\ \/ \b \f \n \r \t`
//!   (a `\u` escape is declined: the gem keeps lone surrogates its own way);
//! - integers that fit an `i64` (the gem's `rb_cstr2inum` gives the same Integer);
//! - floats of at most 17 significant digits whose value is a finite normal double, or a zero
//!   written with zero digits: both sides round the decimal to the nearest double, so they agree;
//!   longer mantissas, overflow and underflow (where the gem warns) are declined;
//! - the four JSON whitespace bytes (the gem also skips `/* */` and `//` comments: declined);
//! - objects, arrays, `true`, `false`, `null`, nested at most the gem's 100 levels deep; nothing
//!   before or after the value, no trailing commas, no `NaN`/`Infinity` (the gem refuses them too).
//!
//! Duplicate keys go to the builder in order, so a Hash built with `[]=` keeps the last value, as
//! the gem's does. The reader allocates nothing for a string without escapes.

use std::borrow::Cow;

/// The gem's `max_nesting` default: an array or object 101 levels deep raises there.
pub const MAX_NESTING: usize = 100;
/// Significant digits that any decimal of a double needs at most (Ruby's `Float#to_s` writes no more).
const MAX_FLOAT_DIGITS: usize = 17;

/// What the reader's values are built into: a Ruby Hash in the binding, `serde_json` in the tests.
pub trait Build {
    type Value: Copy;
    /// Whether the values handed over are used. A builder that uses none is handed a number only
    /// once the reader knows it would accept it, without working out its value where that does not
    /// decide it.
    const USES_VALUES: bool = true;
    fn null(&mut self) -> Self::Value;
    fn boolean(&mut self, value: bool) -> Self::Value;
    fn integer(&mut self, value: i64) -> Self::Value;
    fn float(&mut self, value: f64) -> Self::Value;
    /// `value` is valid UTF-8, already unescaped.
    fn string(&mut self, value: &[u8]) -> Self::Value;
    fn array(&mut self) -> Self::Value;
    fn push(&mut self, array: Self::Value, item: Self::Value);
    /// `depth` is 1 for the outermost object.
    fn object(&mut self, depth: usize) -> Self::Value;
    /// `depth` is 1 for the keys of the outermost object.
    fn insert(&mut self, object: Self::Value, key: &[u8], value: Self::Value, depth: usize);
    /// The object's last pair was inserted (a builder that holds pairs back inserts them now).
    fn close(&mut self, _object: Self::Value, _depth: usize) {}
    /// Whether to build the value of `key` in an object at `depth`. A value not built is read and
    /// checked all the same (a value the reader declines declines the whole), and [`Build::skipped`]
    /// is told where it lies instead of [`Build::insert`].
    fn wants(&mut self, _key: &[u8], _depth: usize) -> bool {
        true
    }
    /// The value of `key` was read without being built: it is `at` in the input, as written.
    fn skipped(&mut self, _key: &[u8], _at: std::ops::Range<usize>, _depth: usize) {}
}

/// The value methods of a [`Build`] whose values are `()`: it builds nothing (`object` and the
/// pair hooks are its own).
macro_rules! build_nothing {
    () => {
        fn null(&mut self) {}
        fn boolean(&mut self, _: bool) {}
        fn integer(&mut self, _: i64) {}
        fn float(&mut self, _: f64) {}
        fn string(&mut self, _: &[u8]) {}
        fn array(&mut self) {}
        fn push(&mut self, _: (), _: ()) {}
        fn insert(&mut self, _: (), _: &[u8], _: (), _: usize) {}
    };
}
pub(crate) use build_nothing;

/// Builds nothing: what a skipped value is read with.
struct Skip;

impl Build for Skip {
    type Value = ();
    const USES_VALUES: bool = false;
    build_nothing!();
    fn object(&mut self, _: usize) {}
}

/// The value `raw` holds, built with `build`; `None` when it is not in the subset above (the builder
/// may have been given part of it).
pub fn parse<B: Build>(raw: &[u8], build: &mut B) -> Option<B::Value> {
    parse_at(raw, 0, build)
}

/// The value `raw` holds, read as the value of a key in an object at `depth` (1: the outermost
/// object's), so that the containers in it are at `depth + 1` and beyond, as they were in the whole.
/// What [`Build::skipped`] pointed at, built later on its own; it is accepted as it was then.
pub fn parse_at<B: Build>(raw: &[u8], depth: usize, build: &mut B) -> Option<B::Value> {
    // UTF-8 is checked where it can occur: outside strings the reader takes only ASCII.
    let mut reader = Reader {
        s: raw,
        i: 0,
        scratch: Vec::new(),
    };
    reader.skip_space();
    let value = reader.value(build, depth)?;
    reader.skip_space();
    (reader.i == raw.len()).then_some(value)
}

struct Reader<'a> {
    s: &'a [u8],
    i: usize,
    /// Where an escaped string is unescaped.
    scratch: Vec<u8>,
}

impl<'a> Reader<'a> {
    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }

    fn skip_space(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.i += 1;
        }
    }

    /// Consumes `byte` (after any whitespace) or declines.
    fn expect(&mut self, byte: u8) -> Option<()> {
        self.skip_space();
        (self.peek()? == byte).then(|| self.i += 1)
    }

    /// A value starting at the current byte; `depth` is the nesting of the container it is in.
    fn value<B: Build>(&mut self, build: &mut B, depth: usize) -> Option<B::Value> {
        match self.peek()? {
            b'{' => self.object(build, depth + 1),
            b'[' => self.array(build, depth + 1),
            b'"' => {
                let text = self.string()?;
                Some(build.string(&text))
            }
            b't' => self.literal(b"true").map(|()| build.boolean(true)),
            b'f' => self.literal(b"false").map(|()| build.boolean(false)),
            b'n' => self.literal(b"null").map(|()| build.null()),
            b'-' | b'0'..=b'9' => self.number(build),
            _ => None,
        }
    }

    fn literal(&mut self, word: &[u8]) -> Option<()> {
        let end = self.i + word.len();
        (self.s.get(self.i..end)? == word).then(|| self.i = end)
    }

    fn object<B: Build>(&mut self, build: &mut B, depth: usize) -> Option<B::Value> {
        if depth > MAX_NESTING {
            return None;
        }
        self.i += 1;
        let object = build.object(depth);
        self.skip_space();
        if self.peek()? == b'}' {
            self.i += 1;
            build.close(object, depth);
            return Some(object);
        }
        loop {
            self.skip_space();
            if self.peek()? != b'"' {
                return None;
            }
            let key = self.string()?.into_owned_if_scratch();
            self.expect(b':')?;
            self.skip_space();
            if build.wants(&key, depth) {
                let value = self.value(build, depth)?;
                build.insert(object, &key, value, depth);
            } else {
                let start = self.i;
                self.value(&mut Skip, depth)?;
                build.skipped(&key, start..self.i, depth);
            }
            self.skip_space();
            match self.peek()? {
                b',' => self.i += 1,
                b'}' => {
                    self.i += 1;
                    build.close(object, depth);
                    return Some(object);
                }
                _ => return None,
            }
        }
    }

    fn array<B: Build>(&mut self, build: &mut B, depth: usize) -> Option<B::Value> {
        if depth > MAX_NESTING {
            return None;
        }
        self.i += 1;
        let array = build.array();
        self.skip_space();
        if self.peek()? == b']' {
            self.i += 1;
            return Some(array);
        }
        loop {
            self.skip_space();
            let item = self.value(build, depth)?;
            build.push(array, item);
            self.skip_space();
            match self.peek()? {
                b',' => self.i += 1,
                b']' => {
                    self.i += 1;
                    return Some(array);
                }
                _ => return None,
            }
        }
    }

    /// The string whose opening quote is the current byte, unescaped: borrowed from the input when
    /// it has no escapes.
    fn string(&mut self) -> Option<Text<'a, '_>> {
        self.i += 1;
        let start = self.i;
        // Most strings are printable ASCII to their closing quote: found eight bytes at a time.
        let plain = plain_run(self.s.get(start..)?);
        if self.s.get(start + plain) == Some(&b'"') {
            self.i = start + plain + 1;
            return Some(Text::Input(&self.s[start..start + plain]));
        }
        // The run is checked; what follows it is read the long way.
        self.i = start + plain;
        let mut copied = false;
        loop {
            let rest = self.s.get(self.i..)?;
            let found = memchr::memchr2(b'"', b'\\', rest)?;
            let run = &rest[..found];
            if run.iter().any(|&b| b < 0x20) {
                return None;
            }
            // A run ends at a quote or a backslash, never inside a character.
            if !run.is_ascii() {
                std::str::from_utf8(run).ok()?;
            }
            if copied {
                self.scratch.extend_from_slice(run);
            }
            let at = self.i + found;
            if self.s[at] == b'"' {
                self.i = at + 1;
                return Some(if copied {
                    Text::Scratch(&self.scratch)
                } else {
                    Text::Input(&self.s[start..at])
                });
            }
            if !copied {
                self.scratch.clear();
                self.scratch.extend_from_slice(&self.s[start..at]);
                copied = true;
            }
            self.scratch.push(unescape(*self.s.get(at + 1)?)?);
            self.i = at + 2;
        }
    }

    /// A number in JSON's grammar (which is the gem's), as an i64 or a double that the gem would
    /// read alike.
    fn number<B: Build>(&mut self, build: &mut B) -> Option<B::Value> {
        let start = self.i;
        if self.peek() == Some(b'-') {
            self.i += 1;
        }
        let int_start = self.i;
        match self.peek()? {
            b'0' => self.i += 1,
            b'1'..=b'9' => self.skip_digits(),
            _ => return None,
        }
        let int_digits = &self.s[int_start..self.i];
        let mut frac_digits: &[u8] = &[];
        let mut float = false;
        if self.peek() == Some(b'.') {
            self.i += 1;
            let from = self.i;
            self.skip_digits();
            if self.i == from {
                return None;
            }
            frac_digits = &self.s[from..self.i];
            float = true;
        }
        let exponent = matches!(self.peek(), Some(b'e' | b'E'));
        if exponent {
            self.i += 1;
            if let Some(b'+' | b'-') = self.peek() {
                self.i += 1;
            }
            let from = self.i;
            self.skip_digits();
            if self.i == from {
                return None;
            }
            float = true;
        }
        // "01", "1.2.3", "1e5e5", "1-2": the gem fails on them; whatever it does, they are not ours.
        if let Some(b'0'..=b'9' | b'.' | b'e' | b'E' | b'+' | b'-') = self.peek() {
            return None;
        }
        if !B::USES_VALUES && self.i - start < UNWEIGHED_NUMBER_MAX {
            // Accepted whatever its value: an integer of fewer than 19 digits fits an i64, and a
            // decimal without an exponent, of at most 17 significant digits and under 300 bytes,
            // is zero or lies between 1e-300 and 1e17, a normal double (checked below).
            if !float && int_digits.len() < 19 {
                return Some(build.integer(0));
            }
            if float && !exponent && significant_digits(int_digits, frac_digits) <= MAX_FLOAT_DIGITS
            {
                return Some(build.float(0.0));
            }
        }
        // ASCII: every byte was matched above.
        let text = std::str::from_utf8(&self.s[start..self.i]).ok()?;
        if !float {
            return text.parse::<i64>().ok().map(|n| build.integer(n));
        }
        let significant = significant_digits(int_digits, frac_digits);
        if significant > MAX_FLOAT_DIGITS {
            return None;
        }
        let value: f64 = text.parse().ok()?;
        let exact_zero = significant == 0;
        if value.is_normal() || (value == 0.0 && exact_zero) {
            Some(build.float(value))
        } else {
            None
        }
    }

    fn skip_digits(&mut self) {
        while let Some(b'0'..=b'9') = self.peek() {
            self.i += 1;
        }
    }
}

/// The byte the escape `\<escape>` stands for, among the escapes the reader accepts (no `\u`).
pub(crate) fn unescape(escape: u8) -> Option<u8> {
    Some(match escape {
        b'"' => b'"',
        b'\\' => b'\\',
        b'/' => b'/',
        b'b' => 0x08,
        b'f' => 0x0c,
        b'n' => b'\n',
        b'r' => b'\r',
        b't' => b'\t',
        _ => return None,
    })
}

/// The length of the run of printable ASCII bytes other than `"` and `\` that `bytes` starts with
/// (DEL included: JSON allows it). Eight bytes at a time: a byte is flagged where it equals one of
/// the two (`has_zero` of the byte XORed with it), is below 0x20 (the subtraction borrows from a
/// byte whose high bit is clear) or has its high bit set. Borrows only carry upwards, so the
/// lowest flagged byte is the first that ends the run.
pub(crate) fn plain_run(bytes: &[u8]) -> usize {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let zero = |x: u64| x.wrapping_sub(ONES) & !x;
    let mut chunks = bytes.chunks_exact(8);
    let mut run = 0;
    for chunk in &mut chunks {
        let mut word = [0; 8];
        word.copy_from_slice(chunk);
        let v = u64::from_le_bytes(word);
        let flagged = (zero(v ^ (ONES * u64::from(b'"')))
            | zero(v ^ (ONES * u64::from(b'\\')))
            | (v.wrapping_sub(ONES * 0x20) & !v)
            | v)
            & HIGH;
        if flagged != 0 {
            return run + flagged.trailing_zeros() as usize / 8;
        }
        run += 8;
    }
    run + chunks
        .remainder()
        .iter()
        .take_while(|&&b| plain_byte(b))
        .count()
}

/// A byte [`plain_run`] passes over.
fn plain_byte(b: u8) -> bool {
    (0x20..0x80).contains(&b) && b != b'"' && b != b'\\'
}

/// A number's digits from its first one that is not zero. JSON writes no leading zero before
/// another digit, so only an integer part of `0` can have any.
fn significant_digits(int_digits: &[u8], frac_digits: &[u8]) -> usize {
    if int_digits != b"0" {
        return int_digits.len() + frac_digits.len();
    }
    frac_digits.iter().skip_while(|&&b| b == b'0').count()
}

/// A number written in fewer bytes than this is accepted by its digits alone where it has no
/// exponent ([`Build::USES_VALUES`]).
const UNWEIGHED_NUMBER_MAX: usize = 300;

/// A string read: from the input, or unescaped into the reader's scratch buffer.
enum Text<'a, 'r> {
    Input(&'a [u8]),
    Scratch(&'r [u8]),
}

impl<'a> Text<'a, '_> {
    /// The key of an object member outlives the reading of its value, which reuses the scratch
    /// buffer: an escaped key is copied out.
    fn into_owned_if_scratch(self) -> Cow<'a, [u8]> {
        match self {
            Text::Input(bytes) => Cow::Borrowed(bytes),
            Text::Scratch(bytes) => Cow::Owned(bytes.to_vec()),
        }
    }
}

impl std::ops::Deref for Text<'_, '_> {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match self {
            Text::Input(bytes) | Text::Scratch(bytes) => bytes,
        }
    }
}

#[cfg(test)]
mod tests;
