//! The engine's error type. Every fallible engine call returns `Result<T, Error>`; the Ruby binding maps
//! each variant to one Ruby exception class in one place.

use thiserror::Error as ThisError;

#[derive(Debug, ThisError)]
pub enum Error {
    /// Redis could not be reached, or the connection broke.
    #[error("cannot reach Redis: {0}")]
    Connection(String),
    /// Redis answered with an error.
    #[error("Redis error: {0}")]
    Redis(String),
    /// The caller passed something the engine cannot use (bad URL, bad queue spec, bad job JSON).
    #[error("{0}")]
    InvalidArgument(String),
    /// Data found in Redis is not what it should be (the job is sent to the dead set with this text).
    #[error("invalid job data: {0}")]
    InvalidJob(String),
    /// The engine was shut down, or this process forked away from the one that owned it.
    #[error("{0}")]
    Closed(String),
}

impl From<redis::RedisError> for Error {
    fn from(e: redis::RedisError) -> Self {
        if e.is_io_error()
            || e.is_connection_refusal()
            || e.is_connection_dropped()
            || e.is_timeout()
            || e.is_unrecoverable_error()
        {
            Error::Connection(e.to_string())
        } else {
            Error::Redis(e.to_string())
        }
    }
}

pub type Result<T> = std::result::Result<T, Error>;
