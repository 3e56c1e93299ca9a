//! `JobQueue::Native.job_lines`, `log_write`, `log_flush` (and `log_level=`, the engine's filter): the engine's log sink (see
//! `queue_core::job_lines`), shared by the per-job lines the engine writes and the Ruby logger's
//! device, so that one stream keeps its order.

use magnus::{Error, RModule, RString, Ruby};

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

/// `log_flush`: writes out what waits in the sink (a write to the log descriptor).
fn log_flush() {
    queue_core::job_lines::flush();
}

pub fn define(_ruby: &Ruby, native: &RModule) -> Result<(), Error> {
    native.define_module_function("job_lines", magnus::function!(job_lines, 2))?;
    native.define_module_function("log_write", magnus::function!(log_write, 1))?;
    native.define_module_function("log_flush", magnus::function!(log_flush, 0))?;
    native.define_module_function("log_level=", magnus::function!(crate::set_log_level, 1))?;
    Ok(())
}
