//! The sd_notify protocol (sd_notify(3)): how a service tells its manager (systemd, or anything that
//! speaks the same datagrams) that it is ready, what it is doing, that it is stopping, and that it is
//! still alive.
//!
//! The manager passes `NOTIFY_SOCKET`: an absolute path of a `SOCK_DGRAM` unix socket, or `@name` for
//! one in Linux's abstract namespace. Each message is one datagram of `KEY=VALUE` lines. When the
//! manager also wants a watchdog it passes `WATCHDOG_USEC` (and `WATCHDOG_PID`, the process meant),
//! and the service sends `WATCHDOG=1` at least that often; sd_watchdog_enabled(3) advises every half.
//!
//! Nothing here knows what a server is: [`crate::supervisor`] decides what to say and when. Without
//! `NOTIFY_SOCKET` there is no [`Notifier`] and so no socket, task or message at all. The socket is
//! non-blocking: a manager that stops reading costs a dropped message, never a stalled engine.

use std::io;
use std::os::unix::net::{SocketAddr, UnixDatagram};
use std::time::Duration;

use thiserror::Error as ThisError;

/// The variables the manager sets.
pub const NOTIFY_SOCKET: &str = "NOTIFY_SOCKET";
pub const WATCHDOG_USEC: &str = "WATCHDOG_USEC";
pub const WATCHDOG_PID: &str = "WATCHDOG_PID";

/// What can go wrong speaking to the service manager.
#[derive(Debug, ThisError)]
pub enum NotifyError {
    /// `NOTIFY_SOCKET` names no socket this process can reach.
    #[error("NOTIFY_SOCKET={value:?} is not usable: {reason}")]
    InvalidSocket { value: String, reason: &'static str },
    /// `WATCHDOG_USEC` or `WATCHDOG_PID` is not a positive whole number.
    #[error("{name}={value:?} is not a positive whole number")]
    InvalidWatchdog { name: &'static str, value: String },
    /// The local end of the datagram socket could not be made.
    #[error("cannot open a datagram socket to notify {socket}: {source}")]
    Open {
        socket: String,
        #[source]
        source: io::Error,
    },
    /// The manager's socket did not take the message (gone, full, refused).
    #[error("cannot send {message:?} to the service manager at {socket}: {source}")]
    Send {
        socket: String,
        message: String,
        #[source]
        source: io::Error,
    },
}

/// One connection to the service manager's notification socket.
#[derive(Debug)]
pub struct Notifier {
    socket: UnixDatagram,
    address: SocketAddr,
    /// `NOTIFY_SOCKET` as given, for messages.
    name: String,
}

impl Notifier {
    /// The manager's socket from `NOTIFY_SOCKET`, or `None` when it is unset (not supervised).
    pub fn from_env() -> Result<Option<Notifier>, NotifyError> {
        match std::env::var_os(NOTIFY_SOCKET) {
            None => Ok(None),
            Some(value) => match value.into_string() {
                Ok(value) => Notifier::connect(&value).map(Some),
                Err(raw) => Err(NotifyError::InvalidSocket {
                    value: raw.to_string_lossy().into_owned(),
                    reason: "it is not valid UTF-8",
                }),
            },
        }
    }

    /// A notifier for `socket`: an absolute path, or `@name` for an abstract socket (Linux).
    pub fn connect(socket: &str) -> Result<Notifier, NotifyError> {
        let address = parse_address(socket)?;
        let open = |source| NotifyError::Open {
            socket: socket.to_owned(),
            source,
        };
        let local = UnixDatagram::unbound().map_err(open)?;
        local.set_nonblocking(true).map_err(open)?;
        Ok(Notifier {
            socket: local,
            address,
            name: socket.to_owned(),
        })
    }

    /// Sends one message: `KEY=VALUE` lines separated by `\n`.
    pub fn send(&self, message: &str) -> Result<(), NotifyError> {
        match self.socket.send_to_addr(message.as_bytes(), &self.address) {
            Ok(_) => Ok(()),
            Err(source) => Err(NotifyError::Send {
                socket: self.name.clone(),
                message: message.to_owned(),
                source,
            }),
        }
    }

    /// `READY=1`: start-up is complete.
    pub fn ready(&self) -> Result<(), NotifyError> {
        self.send("READY=1")
    }

    /// `STOPPING=1`: a stop has begun.
    pub fn stopping(&self) -> Result<(), NotifyError> {
        self.send("STOPPING=1")
    }

    /// `WATCHDOG=1`: still alive.
    pub fn watchdog(&self) -> Result<(), NotifyError> {
        self.send("WATCHDOG=1")
    }

    /// `STATUS=…`: one line an operator sees in `systemctl status`. Line breaks would end the field,
    /// so they become spaces.
    pub fn status(&self, text: &str) -> Result<(), NotifyError> {
        self.send(&status_message(text))
    }
}

/// The `STATUS=` message for `text`, on one line.
pub fn status_message(text: &str) -> String {
    let line: String = text
        .chars()
        .map(|c| if c == '\n' || c == '\r' { ' ' } else { c })
        .collect();
    format!("STATUS={line}")
}

fn parse_address(socket: &str) -> Result<SocketAddr, NotifyError> {
    let invalid = |reason| NotifyError::InvalidSocket {
        value: socket.to_owned(),
        reason,
    };
    if let Some(name) = socket.strip_prefix('@') {
        if name.is_empty() {
            return Err(invalid("an abstract socket needs a name after @"));
        }
        return abstract_address(name.as_bytes()).map_err(|_| invalid(ABSTRACT_UNAVAILABLE));
    }
    if !socket.starts_with('/') {
        return Err(invalid(
            "expected an absolute path or @name (other address families are not supported)",
        ));
    }
    SocketAddr::from_pathname(socket).map_err(|_| invalid("the path is too long for a unix socket"))
}

#[cfg(target_os = "linux")]
const ABSTRACT_UNAVAILABLE: &str = "the abstract name is too long";
#[cfg(not(target_os = "linux"))]
const ABSTRACT_UNAVAILABLE: &str = "abstract sockets exist only on Linux";

#[cfg(target_os = "linux")]
fn abstract_address(name: &[u8]) -> io::Result<SocketAddr> {
    use std::os::linux::net::SocketAddrExt;
    SocketAddr::from_abstract_name(name)
}

#[cfg(not(target_os = "linux"))]
fn abstract_address(_name: &[u8]) -> io::Result<SocketAddr> {
    Err(io::Error::from(io::ErrorKind::Unsupported))
}

/// How often to send `WATCHDOG=1`, from `WATCHDOG_USEC` and `WATCHDOG_PID`: `None` when the manager
/// wants no watchdog or wants it from another process.
pub fn watchdog_interval_from_env() -> Result<Option<Duration>, NotifyError> {
    let usec = std::env::var(WATCHDOG_USEC).ok();
    let pid = std::env::var(WATCHDOG_PID).ok();
    watchdog_interval(usec.as_deref(), pid.as_deref(), std::process::id())
}

/// Half of `usec` (the interval sd_watchdog_enabled(3) advises), or `None` without `usec` or when
/// `pid` names another process than `own_pid`.
pub fn watchdog_interval(
    usec: Option<&str>,
    pid: Option<&str>,
    own_pid: u32,
) -> Result<Option<Duration>, NotifyError> {
    let Some(usec) = usec else {
        return Ok(None);
    };
    let usec = positive(WATCHDOG_USEC, usec)?;
    if let Some(pid) = pid {
        if positive(WATCHDOG_PID, pid)? != u64::from(own_pid) {
            return Ok(None);
        }
    }
    Ok(Some(Duration::from_micros(usec) / 2))
}

fn positive(name: &'static str, value: &str) -> Result<u64, NotifyError> {
    match value.trim().parse::<u64>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(NotifyError::InvalidWatchdog {
            name,
            value: value.to_owned(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_watchdog_interval_is_half_of_watchdog_usec() {
        assert_eq!(
            watchdog_interval(Some("10000000"), None, 7).expect("valid"),
            Some(Duration::from_secs(5))
        );
        assert_eq!(
            watchdog_interval(Some("200000"), Some("7"), 7).expect("valid"),
            Some(Duration::from_millis(100))
        );
    }

    #[test]
    fn no_watchdog_without_usec_or_for_another_pid() {
        assert_eq!(watchdog_interval(None, Some("7"), 7).expect("valid"), None);
        assert_eq!(
            watchdog_interval(Some("1000000"), Some("8"), 7).expect("valid"),
            None
        );
    }

    #[test]
    fn a_bad_watchdog_value_is_an_error_naming_the_variable() {
        for (usec, pid, name) in [
            ("0", None, WATCHDOG_USEC),
            ("ten", None, WATCHDOG_USEC),
            ("-5", None, WATCHDOG_USEC),
            ("1000000", Some("me"), WATCHDOG_PID),
        ] {
            let err = watchdog_interval(Some(usec), pid, 7).expect_err(usec);
            assert!(
                matches!(err, NotifyError::InvalidWatchdog { name: n, .. } if n == name),
                "{err}"
            );
            assert!(err.to_string().starts_with(name), "{err}");
        }
    }

    #[test]
    fn a_socket_must_be_an_absolute_path_or_an_abstract_name() {
        for bad in ["relative/notify.sock", "", "@", "vsock:2:1234"] {
            let err = Notifier::connect(bad).expect_err(bad);
            assert!(
                matches!(err, NotifyError::InvalidSocket { .. }),
                "{bad}: {err}"
            );
            assert!(err.to_string().contains("NOTIFY_SOCKET="), "{err}");
        }
        let long = format!("/{}", "x".repeat(200));
        assert!(matches!(
            Notifier::connect(&long),
            Err(NotifyError::InvalidSocket { .. })
        ));
    }

    #[test]
    fn status_stays_on_one_line() {
        assert_eq!(status_message("a\nb\r\nc"), "STATUS=a b  c");
    }
}
