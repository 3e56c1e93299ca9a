//! Job arguments written as JSON straight from Ruby values, for `perform_async`'s common case.
//!
//! Only the plainest values are taken: nil, true, false, Fixnums, Strings in UTF-8 (or US-ASCII)
//! without control characters, and Arrays and Hashes with such String keys of those. For those the
//! bytes written here are exactly what Ruby's `JSON.generate` writes, which matters beyond the job
//! itself: GitLab's idempotency key hashes the arguments' JSON. Anything else (Floats, Bignums,
//! Symbols, other encodings, deep nesting) makes [`write`] answer `None`, and the Ruby client takes
//! its general path, which checks and serializes the job itself (and raises for arguments that are
//! not JSON-native).

use magnus::value::{Qfalse, Qtrue};
use magnus::{prelude::*, r_hash::ForEach, Fixnum, RArray, RHash, RString, Ruby, Value};

/// Deeper nesting than this goes the general way.
const MAX_DEPTH: usize = 32;

/// [`write`] for each element of `list` (each an Array of one job's arguments); `None` when any element
/// is not an Array or holds a value the engine does not write (the caller takes the Ruby path whole).
pub fn write_each(ruby: &Ruby, list: RArray) -> Option<Vec<Vec<u8>>> {
    list.into_iter()
        .map(|args| RArray::from_value(args).and_then(|a| write(ruby, a)))
        .collect()
}

/// The JSON of `args`, or `None` when a value is not one this fast path takes.
pub fn write(ruby: &Ruby, args: RArray) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(16 + args.len() * 8);
    array(ruby, args, &mut out, 0).then_some(out)
}

fn value(ruby: &Ruby, v: Value, out: &mut Vec<u8>, depth: usize) -> bool {
    if v.is_nil() {
        out.extend_from_slice(b"null");
    } else if Qtrue::from_value(v).is_some() {
        out.extend_from_slice(b"true");
    } else if Qfalse::from_value(v).is_some() {
        out.extend_from_slice(b"false");
    } else if let Some(n) = Fixnum::from_value(v) {
        out.extend_from_slice(n.to_i64().to_string().as_bytes());
    } else if let Some(s) = RString::from_value(v) {
        return string(s, out);
    } else if let Some(a) = RArray::from_value(v) {
        return array(ruby, a, out, depth + 1);
    } else if let Some(h) = RHash::from_value(v) {
        return hash(ruby, h, out, depth + 1);
    } else {
        return false;
    }
    true
}

fn array(ruby: &Ruby, a: RArray, out: &mut Vec<u8>, depth: usize) -> bool {
    if depth > MAX_DEPTH {
        return false;
    }
    out.push(b'[');
    for (i, v) in a.into_iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        if !value(ruby, v, out, depth) {
            return false;
        }
    }
    out.push(b']');
    true
}

fn hash(ruby: &Ruby, h: RHash, out: &mut Vec<u8>, depth: usize) -> bool {
    if depth > MAX_DEPTH {
        return false;
    }
    out.push(b'{');
    let mut ok = true;
    let mut first = true;
    let walked = h.foreach(|k: Value, v: Value| {
        let key_ok = RString::from_value(k).is_some_and(|k| {
            if !first {
                out.push(b',');
            }
            first = false;
            string(k, out)
        });
        if !key_ok {
            ok = false;
            return Ok(ForEach::Stop);
        }
        out.push(b':');
        if !value(ruby, v, out, depth) {
            ok = false;
            return Ok(ForEach::Stop);
        }
        Ok(ForEach::Continue)
    });
    out.push(b'}');
    ok && walked.is_ok()
}

/// A string as JSON: only `"` and `\` need escaping, since control characters are refused.
fn string(s: RString, out: &mut Vec<u8>) -> bool {
    if !s.is_utf8_compatible_encoding() {
        return false;
    }
    // SAFETY: the bytes are read and copied before any Ruby code can run.
    let bytes = unsafe { s.as_slice() };
    if bytes.iter().any(|&b| b < 0x20) || std::str::from_utf8(bytes).is_err() {
        return false;
    }
    out.push(b'"');
    for &b in bytes {
        if b == b'"' || b == b'\\' {
            out.push(b'\\');
        }
        out.push(b);
    }
    out.push(b'"');
    true
}
