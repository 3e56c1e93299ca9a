//! The engine's error type. Every fallible engine call returns `Result<T, Error>`; the Ruby binding maps
//! each variant to one Ruby exception class in one place.
//!
//! An error made from a lower-level one keeps it as its [`std::error::Error::source`], so a caller (or
//! a log line) can walk down to what the redis crate or the OS said.

use thiserror::Error as ThisError;

use crate::link::connect_error::ConnectError;

#[derive(Debug, ThisError)]
pub enum Error {
    /// Redis could not be reached, or the connection broke.
    #[error("cannot reach Redis: {message}")]
    Connection {
        message: String,
        #[source]
        source: Option<redis::RedisError>,
    },
    /// Redis could not be used at all: refused, wants a password, no such database, TLS not
    /// trusted. The message names the (masked) URL and says what to change.
    #[error(transparent)]
    Connect(Box<ConnectError>),
    /// Redis answered with an error, or with a reply the engine cannot use.
    #[error("Redis error: {message}")]
    Redis {
        message: String,
        #[source]
        source: Option<redis::RedisError>,
    },
    /// The caller passed something the engine cannot use (bad URL, bad queue spec, bad job JSON).
    #[error("{0}")]
    InvalidArgument(String),
    /// Data found in Redis is not what it should be (the job is sent to the dead set with this text).
    #[error("invalid job data: {0}")]
    InvalidJob(String),
    /// The engine was shut down, could not start, or this process forked away from the one that
    /// owned it.
    #[error("{message}")]
    Closed {
        message: String,
        #[source]
        source: Option<std::io::Error>,
    },
    /// A push reached the master, but fewer replicas than `wait_replicas` acknowledged it within its
    /// timeout (`link::wait_replicas`). The job may still run, or be lost in a failover; it was not
    /// pushed again.
    #[error(
        "push not confirmed by {wanted} replica(s): WAIT answered only {reached} within {timeout_ms} ms \
         (redis option wait_replicas: {wanted}, wait_timeout: {timeout_ms}); the master has the job, \
         which may still run or be lost in a failover, so it was not pushed again"
    )]
    Replication {
        wanted: u32,
        reached: i64,
        timeout_ms: u64,
    },
    /// A multi-step operation attempted every step and some failed: each is named with its error.
    #[error("{operation} incomplete: {}", describe(.failed))]
    Incomplete {
        operation: &'static str,
        failed: Vec<(&'static str, Error)>,
    },
}

fn describe(failed: &[(&'static str, Error)]) -> String {
    failed
        .iter()
        .map(|(step, e)| format!("could not {step} ({e})"))
        .collect::<Vec<_>>()
        .join("; ")
}

impl Error {
    /// Redis could not be reached; no lower-level error to keep.
    pub fn connection(message: impl Into<String>) -> Error {
        Error::Connection {
            message: message.into(),
            source: None,
        }
    }

    /// Redis answered with something the engine cannot use.
    pub fn redis(message: impl Into<String>) -> Error {
        Error::Redis {
            message: message.into(),
            source: None,
        }
    }

    /// The engine cannot serve this call (stopped, forked away).
    pub fn closed(message: impl Into<String>) -> Error {
        Error::Closed {
            message: message.into(),
            source: None,
        }
    }

    /// The engine could not start something the OS provides (a runtime, a thread).
    pub fn closed_by(message: impl Into<String>, source: std::io::Error) -> Error {
        Error::Closed {
            message: message.into(),
            source: Some(source),
        }
    }

    /// Every step of `operation` was attempted; these failed.
    pub fn incomplete(operation: &'static str, failed: Vec<(&'static str, Error)>) -> Error {
        Error::Incomplete { operation, failed }
    }

    /// What stopped the connection from being made, when that is what happened.
    pub fn connect_error(&self) -> Option<&ConnectError> {
        match self {
            Error::Connect(e) => Some(e),
            _ => None,
        }
    }

    /// True when the connection broke or could not be made: the command's effect is unknown.
    pub fn is_connection(&self) -> bool {
        match self {
            Error::Connection { .. } | Error::Connect(_) => true,
            Error::Incomplete { failed, .. } => failed.iter().any(|(_, e)| e.is_connection()),
            _ => false,
        }
    }
}

impl From<redis::RedisError> for Error {
    fn from(e: redis::RedisError) -> Self {
        let message = e.to_string();
        if e.is_io_error()
            || e.is_connection_refusal()
            || e.is_connection_dropped()
            || e.is_timeout()
            || e.is_unrecoverable_error()
        {
            Error::Connection {
                message,
                source: Some(e),
            }
        } else {
            Error::Redis {
                message,
                source: Some(e),
            }
        }
    }
}

impl From<ConnectError> for Error {
    fn from(e: ConnectError) -> Self {
        Error::Connect(Box::new(e))
    }
}

pub type Result<T> = std::result::Result<T, Error>;

#[cfg(test)]
mod tests {
    use super::*;
    use std::error::Error as _;

    #[test]
    fn a_redis_error_is_kept_as_the_source() {
        let refused =
            redis::RedisError::from(std::io::Error::from(std::io::ErrorKind::ConnectionRefused));
        let e = Error::from(refused);
        assert!(e.is_connection());
        assert!(e.to_string().starts_with("cannot reach Redis: "));
        let source = e.source().expect("a source");
        assert!(source.downcast_ref::<redis::RedisError>().is_some());
    }

    #[test]
    fn an_incomplete_operation_names_every_failed_step() {
        let e = Error::incomplete(
            "stop",
            vec![
                ("put back held jobs", Error::connection("refused")),
                ("resign", Error::redis("NOPERM")),
            ],
        );
        assert_eq!(
            e.to_string(),
            "stop incomplete: could not put back held jobs (cannot reach Redis: refused); \
             could not resign (Redis error: NOPERM)"
        );
        assert!(e.is_connection());
    }
}
