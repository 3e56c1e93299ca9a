//! Redis commands written straight into one buffer, in RESP, for the commands every `perform_async`
//! sends (`client::push_new_sync`, the one-job deduplicating script).
//!
//! The redis crate's `Cmd` keeps each argument in a buffer of its own and packs them again into
//! another when it is sent; a `Pipeline` adds a vector of commands and packs those. On a push that
//! was a dozen allocations and three copies of the job's JSON. Here the caller knows every argument
//! up front, and an argument may be given in parts (a key as namespace + name, a job as the
//! template's prefix + its arguments + its jid ...), so a push is one buffer, sized once, with the
//! job written into it in place.

/// The header of a command of `args` arguments (the command's name counts as one).
#[inline]
pub fn array(out: &mut Vec<u8>, args: usize) {
    out.push(b'*');
    decimal(out, args as u64);
    out.extend_from_slice(b"\r\n");
}

/// One argument: the concatenation of `parts`.
#[inline]
pub fn bulk(out: &mut Vec<u8>, parts: &[&[u8]]) {
    let len = parts.iter().map(|p| p.len()).sum::<usize>();
    out.push(b'$');
    decimal(out, len as u64);
    out.extend_from_slice(b"\r\n");
    for part in parts {
        out.extend_from_slice(part);
    }
    out.extend_from_slice(b"\r\n");
}

/// One argument: a number in decimal.
pub fn bulk_number(out: &mut Vec<u8>, n: u64) {
    let mut digits = [0u8; 20];
    let start = digits_of(n, &mut digits);
    bulk(out, &[&digits[start..]]);
}

/// Bytes a [`bulk`] of `len` bytes takes.
pub fn bulk_len(len: usize) -> usize {
    len + 25
}

#[inline]
fn decimal(out: &mut Vec<u8>, n: u64) {
    let mut digits = [0u8; 20];
    let start = digits_of(n, &mut digits);
    out.extend_from_slice(&digits[start..]);
}

/// Writes `n`'s digits at the end of `buf`; returns where they start.
#[inline]
fn digits_of(mut n: u64, buf: &mut [u8; 20]) -> usize {
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            return i;
        }
    }
}

/// A whole command of single-part arguments (the first is its name).
pub fn command(out: &mut Vec<u8>, args: &[&[u8]]) {
    array(out, args.len());
    for arg in args {
        bulk(out, &[arg]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_is_the_crates() {
        let args: [&[u8]; 4] = [b"LREM", b"jq:working:x", b"-1", b"{\"a\":\"\xc3\xa9\"}"];
        let mut out = Vec::new();
        command(&mut out, &args);
        let mut cmd = redis::cmd("LREM");
        cmd.arg(args[1]).arg(-1).arg(args[3]);
        assert_eq!(out, cmd.get_packed_command());
    }

    #[test]
    fn writes_what_the_redis_crate_packs() {
        let mut out = Vec::new();
        array(&mut out, 4);
        bulk(&mut out, &[b"LPUSH"]);
        bulk(&mut out, &[b"ns:", b"queue:", b"default"]);
        bulk(&mut out, &[]);
        bulk_number(&mut out, 21600);
        let packed = redis::cmd("LPUSH")
            .arg("ns:queue:default")
            .arg("")
            .arg(21600)
            .get_packed_command();
        assert_eq!(out, packed);
        let mut zero = Vec::new();
        bulk_number(&mut zero, 0);
        assert_eq!(zero, b"$1\r\n0\r\n");
    }
}
