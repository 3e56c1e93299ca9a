//! Engine errors as Ruby exceptions, mapped in one place. The exception classes are defined in Ruby
//! (`lib/queue/errors.rb`), where they are documented; this file only looks them up.

use magnus::value::Lazy;
use magnus::{prelude::*, Error, ExceptionClass, RModule, Ruby};

fn job_queue_class(ruby: &Ruby, name: &str) -> ExceptionClass {
    ruby.class_object()
        .const_get::<_, RModule>("JobQueue")
        .and_then(|m| m.const_get::<_, ExceptionClass>(name))
        .unwrap_or_else(|_| ruby.exception_runtime_error())
}

static BASE: Lazy<ExceptionClass> = Lazy::new(|ruby| job_queue_class(ruby, "Error"));
static CONNECTION: Lazy<ExceptionClass> =
    Lazy::new(|ruby| job_queue_class(ruby, "ConnectionError"));
static REDIS: Lazy<ExceptionClass> = Lazy::new(|ruby| job_queue_class(ruby, "RedisError"));
static REPLICATION: Lazy<ExceptionClass> =
    Lazy::new(|ruby| job_queue_class(ruby, "ReplicationError"));
static INVALID_JOB: Lazy<ExceptionClass> = Lazy::new(|ruby| job_queue_class(ruby, "InvalidJob"));

/// `JobQueue::Error`, for the binding's errors that are not the engine's `Error`.
pub fn base(ruby: &Ruby) -> ExceptionClass {
    ruby.get_inner(&BASE)
}

pub fn to_ruby(e: queue_core::Error) -> Error {
    let ruby = Ruby::get().expect("engine errors are raised on a Ruby thread");
    let class = match &e {
        e if e.is_connection() => ruby.get_inner(&CONNECTION),
        queue_core::Error::Redis { .. } => ruby.get_inner(&REDIS),
        queue_core::Error::InvalidArgument(_) => ruby.exception_arg_error(),
        queue_core::Error::InvalidJob(_) => ruby.get_inner(&INVALID_JOB),
        queue_core::Error::Replication { .. } => ruby.get_inner(&REPLICATION),
        queue_core::Error::Connection { .. }
        | queue_core::Error::Connect(_)
        | queue_core::Error::Closed { .. }
        | queue_core::Error::Incomplete { .. } => ruby.get_inner(&BASE),
    };
    Error::new(class, e.to_string())
}

/// A panic inside the engine, surfaced as `JobQueue::Error` instead of aborting the app.
pub fn panicked(payload: Box<dyn std::any::Any + Send>) -> Error {
    let ruby = Ruby::get().expect("engine errors are raised on a Ruby thread");
    let text = payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".to_owned());
    Error::new(ruby.get_inner(&BASE), format!("engine panicked: {text}"))
}

/// Runs `f` without the GVL and turns both engine errors and panics into Ruby exceptions.
pub fn blocking<F, T>(f: F) -> Result<T, Error>
where
    F: FnOnce() -> queue_core::Result<T> + Send,
    T: Send,
{
    match crate::nogvl::nogvl(f) {
        Ok(result) => result.map_err(to_ruby),
        Err(payload) => Err(panicked(payload)),
    }
}
