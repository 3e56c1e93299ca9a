//! The socket under a synchronous TCP connection, for the two things the `redis` crate does not do
//! with it: holding unreplied writes in the kernel, and looking for a reply without blocking.
//!
//! **Held writes.** A fetcher writes each finished job's acknowledgement before the next job starts,
//! so that a `kill -9` re-runs only the jobs that were running. Over a unix socket every such write
//! wakes Redis; over TCP the fetcher sends them with `MSG_MORE`: the kernel keeps the bytes in the
//! socket's send queue and sends them, in one segment, with the next write that has no `MSG_MORE`
//! (the next round trip) or after a short timer. They are out of the process: when the process dies,
//! the kernel closes the socket and sends what it holds first (a killed process's held acks reach
//! Redis; the crash spec counts it). Redis then reads a batch's acks in one event instead of about
//! one event per two acks. See ARCHITECTURE.md, "What the per-job ack costs".
//!
//! **Replies looked for without blocking** ([`TcpSocket::has_input`]): what `busy_poll` polls.
//!
//! The crate's synchronous connection does not expose its socket, so [`TcpSocket::find`] looks it up
//! among the process's descriptors by the addresses Redis reports for the connection (`CLIENT INFO`:
//! `addr` is ours, `laddr` Redis's). When it is not found (an address translated on the way, a Redis
//! older than 6.2, no `/proc`), writes go out at once and replies are waited for in the kernel.

use std::io;
use std::net::SocketAddr;
use std::os::fd::{BorrowedFd, RawFd};

/// The socket of one dialled TCP connection. Borrowed: the owner of the connection keeps the two
/// together and drops this with it (`blocking::SyncConn`).
#[derive(Debug)]
pub(crate) struct TcpSocket {
    fd: RawFd,
}

impl TcpSocket {
    /// The socket of `conn`, a TCP connection just dialled (replies on), or `None`.
    pub(crate) fn find(conn: &mut redis::Connection) -> Option<TcpSocket> {
        let info: String = redis::cmd("CLIENT").arg("INFO").query(conn).ok()?;
        let (ours, theirs) = addresses(&info)?;
        let fds = std::fs::read_dir("/proc/self/fd").ok()?;
        fds.filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<RawFd>().ok())
            .find(|&fd| {
                // SAFETY: only reads the socket's names; a descriptor closed meanwhile answers EBADF.
                let fd = unsafe { BorrowedFd::borrow_raw(fd) };
                let sock = socket2::SockRef::from(&fd);
                let named = |a: io::Result<socket2::SockAddr>| a.ok().and_then(|a| a.as_socket());
                named(sock.local_addr()) == Some(ours) && named(sock.peer_addr()) == Some(theirs)
            })
            .map(|fd| TcpSocket { fd })
    }

    /// Whether a read would find something now (a reply, or the connection's end or error), without
    /// blocking or taking it: one `recv` with `MSG_PEEK | MSG_DONTWAIT`.
    pub(crate) fn has_input(&self) -> bool {
        let mut byte = [0u8; 1];
        loop {
            // SAFETY: a peek into a local buffer, on a descriptor the connection keeps open (see the
            // type's doc).
            let n = unsafe {
                libc::recv(
                    self.fd,
                    byte.as_mut_ptr().cast(),
                    byte.len(),
                    libc::MSG_PEEK | libc::MSG_DONTWAIT,
                )
            };
            if n >= 0 {
                return true;
            }
            match io::Error::last_os_error().kind() {
                io::ErrorKind::Interrupted => continue,
                io::ErrorKind::WouldBlock => return false,
                // An error is input too: the read that follows reports it.
                _ => return true,
            }
        }
    }

    /// Writes all of `bytes`, held until the next write without `MSG_MORE` on this socket.
    pub(crate) fn send_held(&self, mut bytes: &[u8]) -> io::Result<()> {
        // SAFETY: the connection that owns the descriptor outlives `self` (see the type's doc).
        let fd = unsafe { BorrowedFd::borrow_raw(self.fd) };
        let sock = socket2::SockRef::from(&fd);
        while !bytes.is_empty() {
            match sock.send_with_flags(bytes, libc::MSG_MORE) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => bytes = &bytes[n..],
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

/// Our address and Redis's, from a `CLIENT INFO` line (`... addr=127.0.0.1:51234 laddr=127.0.0.1:6379 ...`).
fn addresses(info: &str) -> Option<(SocketAddr, SocketAddr)> {
    let field = |name: &str| {
        info.split_ascii_whitespace()
            .find_map(|f| f.strip_prefix(name)?.strip_prefix('='))?
            .parse()
            .ok()
    };
    Some((field("addr")?, field("laddr")?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_both_addresses_of_a_client_info_line() {
        let line = "id=7 addr=127.0.0.1:51234 laddr=127.0.0.1:6379 fd=8 name= age=0\n";
        assert_eq!(
            addresses(line),
            Some((
                "127.0.0.1:51234".parse().expect("addr"),
                "127.0.0.1:6379".parse().expect("addr")
            ))
        );
        let v6 = "id=7 addr=[::1]:51234 laddr=[::1]:6379 fd=8";
        assert_eq!(
            addresses(v6).map(|(a, _)| a.port()),
            Some(51234),
            "IPv6 addresses come bracketed"
        );
    }

    #[test]
    fn a_unix_client_or_an_old_server_has_no_addresses() {
        assert_eq!(
            addresses("id=7 addr=/tmp/redis.sock:0 laddr=/tmp/redis.sock:0"),
            None
        );
        assert_eq!(addresses("id=7 fd=8"), None);
    }
}
