//! `JobQueue::Native.batch_current_thread`: the calling thread under `SCHED_BATCH`
//! (`queue_core::thread_policy`), for a server's job threads.

use magnus::{Error, RModule, Ruby};
use queue_core::thread_policy::{self, PolicyError};

/// Moves the calling thread to `SCHED_BATCH` unless it runs under a policy someone else chose.
/// Returns the thread's policy after ("batch", or the one it keeps), nil where the system has no
/// such policies; raises `JobQueue::Error` when the kernel refuses.
fn batch_current_thread(ruby: &Ruby) -> Result<Option<String>, Error> {
    match thread_policy::batch_current_thread() {
        Ok(policy) => Ok(Some(policy.to_string())),
        Err(PolicyError::Unsupported) => Ok(None),
        Err(e) => Err(Error::new(crate::errors::base(ruby), e.to_string())),
    }
}

pub fn define(native: &RModule) -> Result<(), Error> {
    native.define_module_function(
        "batch_current_thread",
        magnus::function!(batch_current_thread, 0),
    )?;
    Ok(())
}
