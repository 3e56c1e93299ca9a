//! Commands written straight into RESP bytes, for the few that are built once per job (an ack): the
//! `redis` crate's `Cmd` keeps its arguments in two vectors and packs them into a third, where one
//! buffer of the right size does. The bytes are the crate's (the tests compare them).

/// Appends `*<n>\r\n` and then each argument as a bulk string.
pub fn command(out: &mut Vec<u8>, args: &[&[u8]]) {
    out.push(b'*');
    out.extend_from_slice(itoa::Buffer::new().format(args.len()).as_bytes());
    out.extend_from_slice(b"\r\n");
    for arg in args {
        bulk(out, arg);
    }
}

/// Appends `$<len>\r\n<bytes>\r\n`.
pub fn bulk(out: &mut Vec<u8>, bytes: &[u8]) {
    out.push(b'$');
    out.extend_from_slice(itoa::Buffer::new().format(bytes.len()).as_bytes());
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(bytes);
    out.extend_from_slice(b"\r\n");
}

/// What [`command`] writes for `args`, in bytes (for sizing a buffer).
pub fn size(args: &[&[u8]]) -> usize {
    16 + args.iter().map(|a| a.len() + 16).sum::<usize>()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bytes_are_the_crates() {
        let args: [&[u8]; 4] = [b"LREM", b"jq:working:x", b"-1", b"{\"a\":\"\xc3\xa9\"}"];
        let mut out = Vec::new();
        command(&mut out, &args);
        let mut cmd = redis::cmd("LREM");
        cmd.arg(args[1]).arg(-1).arg(args[3]);
        assert_eq!(out, cmd.get_packed_command());
        assert!(out.len() <= size(&args));
        let mut empty = Vec::new();
        command(&mut empty, &[b"PING", b""]);
        assert_eq!(empty, redis::cmd("PING").arg("").get_packed_command());
    }
}
