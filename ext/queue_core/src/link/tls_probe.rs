//! Does a `rediss://` port answer a TLS handshake at all?
//!
//! The redis crate's synchronous dial bounds the TCP connect but not the TLS handshake after it. A
//! `rediss://` URL pointed at a plain port then hangs for good: the client sends its ClientHello and
//! waits for a reply, while redis-server reads the bytes as the start of an inline command and waits
//! for its newline. The asynchronous dial is bounded as a whole, so only synchronous dials need this.
//!
//! [`check`] runs a handshake of its own, with the connect timeout on the socket, before a process's
//! first synchronous TLS dial. It verifies nothing about the server (the real dial does that, and
//! reports an untrusted certificate in its own words): it only tells a port that answers TLS, however
//! the handshake ends, from one that stays silent.

use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

/// A port that did not answer a TLS handshake within the timeout.
#[derive(Debug, thiserror::Error)]
#[error(
    "no reply to a TLS handshake within {timeout:?} (a plain, non-TLS redis-server waits \
     silently for a TLS client)"
)]
pub struct Silent {
    pub timeout: Duration,
}

/// `Err(Silent)` when `host:port` accepts the TCP connection but sends nothing back to a TLS
/// ClientHello within `timeout`. Every other outcome is `Ok`: a completed or failed handshake shows
/// the port speaks TLS (or at least answers), and a failed TCP connect is for the real dial to report.
pub fn check(host: &str, port: u16, timeout: Duration) -> Result<(), Silent> {
    let Some(stream) = connect(host, port, timeout) else {
        return Ok(());
    };
    if stream.set_read_timeout(Some(timeout)).is_err()
        || stream.set_write_timeout(Some(timeout)).is_err()
    {
        return Ok(());
    }
    let connector = match native_tls::TlsConnector::builder()
        .danger_accept_invalid_certs(true)
        .danger_accept_invalid_hostnames(true)
        .build()
    {
        Ok(connector) => connector,
        Err(_) => return Ok(()),
    };
    match connector.connect(host, stream) {
        // A blocking socket whose read timed out mid-handshake: nothing came back.
        Err(native_tls::HandshakeError::WouldBlock(_)) => Err(Silent { timeout }),
        Err(native_tls::HandshakeError::Failure(e)) if is_timeout(&e) => Err(Silent { timeout }),
        Ok(_) | Err(native_tls::HandshakeError::Failure(_)) => Ok(()),
    }
}

fn connect(host: &str, port: u16, timeout: Duration) -> Option<TcpStream> {
    (host, port)
        .to_socket_addrs()
        .ok()?
        .find_map(|addr| TcpStream::connect_timeout(&addr, timeout).ok())
}

fn is_timeout(e: &native_tls::Error) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = source {
        if let Some(io) = err.downcast_ref::<std::io::Error>() {
            if matches!(
                io.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
            ) {
                return true;
            }
        }
        source = err.source();
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::net::TcpListener;

    #[test]
    fn a_silent_port_is_reported_within_the_timeout() {
        // A listener that reads what it is sent and never answers, as a plain redis-server does
        // with a ClientHello.
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let reader = std::thread::spawn(move || {
            if let Ok((mut socket, _)) = listener.accept() {
                let mut buf = [0u8; 4096];
                while matches!(socket.read(&mut buf), Ok(n) if n > 0) {}
            }
        });
        let started = std::time::Instant::now();
        let result = check("127.0.0.1", port, Duration::from_millis(300));
        assert!(result.is_err(), "a silent port passed the check");
        assert!(started.elapsed() < Duration::from_secs(3));
        drop(result);
        reader.join().expect("reader");
    }

    #[test]
    fn a_port_that_answers_and_a_closed_port_pass() {
        // Answers with garbage and closes: the handshake fails, but the port is not silent.
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let answer = std::thread::spawn(move || {
            if let Ok((mut socket, _)) = listener.accept() {
                use std::io::Write;
                let _ = socket.write_all(b"-ERR unknown command\r\n");
            }
        });
        assert!(check("127.0.0.1", port, Duration::from_secs(2)).is_ok());
        answer.join().expect("answer");

        let closed = TcpListener::bind("127.0.0.1:0").expect("bind");
        let closed_port = closed.local_addr().expect("addr").port();
        drop(closed);
        assert!(check("127.0.0.1", closed_port, Duration::from_millis(300)).is_ok());
    }
}
