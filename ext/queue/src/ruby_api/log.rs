//! `JobQueue::Native.job_lines`, `log_write`, `log_event`, `log_flush` (and `log_level=`, the engine's filter): the engine's log sink (see
//! `queue_core::job_lines`), shared by the per-job lines the engine writes and the Ruby logger's
//! device, so that one stream keeps its order.

use std::time::Duration;

use magnus::{Error, RModule, RString, Ruby};
use queue_core::job_lines::Event;

/// `job_lines(enabled, fd)`: turns Sidekiq's per-job lines on or off, writing to descriptor `fd`.
fn job_lines(enabled: bool, fd: i32) {
    queue_core::job_lines::configure(enabled, fd);
}

/// `log_write(string)`: adds whole lines to the sink (GVL held: a copy into memory).
fn log_write(line: RString) -> usize {
    // SAFETY: the bytes are copied before any Ruby code can run.
    let bytes = unsafe { line.as_slice() };
    queue_core::job_lines::sink(bytes);
    bytes.len()
}

/// `log_event(context, event, elapsed_ns)`: an ordered batch's `start` (0), `done` (1) or `fail` (2)
/// line with its ` pid=… tid=… class=… ids=…` context as given, and its elapsed nanoseconds (nil for
/// none); formatted and written with the job lines.
fn log_event(
    ruby: &Ruby,
    context: RString,
    event: i64,
    elapsed_ns: Option<u64>,
) -> Result<(), Error> {
    let event = Event::try_from(event)
        .map_err(|e| Error::new(ruby.exception_arg_error(), e.to_string()))?;
    // SAFETY: the bytes are copied before any Ruby code can run.
    let bytes = unsafe { context.as_slice() };
    queue_core::job_lines::event(bytes, event, elapsed_ns.map(Duration::from_nanos));
    Ok(())
}

/// `log_flush`: writes out what waits in the sink (a write to the log descriptor).
fn log_flush() {
    queue_core::job_lines::flush();
}

pub fn define(_ruby: &Ruby, native: &RModule) -> Result<(), Error> {
    native.define_module_function("job_lines", magnus::function!(job_lines, 2))?;
    native.define_module_function("log_write", magnus::function!(log_write, 1))?;
    native.define_module_function("log_event", magnus::function!(log_event, 3))?;
    native.define_module_function("log_flush", magnus::function!(log_flush, 0))?;
    native.define_module_function("log_level=", magnus::function!(crate::set_log_level, 1))?;
    Ok(())
}
