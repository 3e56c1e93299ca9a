//! This process's id, kept in memory: the binding checks it on every client call (a connection or
//! handle carried through `fork` must not be used by the child), and `getpid` is a system call,
//! ~0.3–0.5 µs on this VM, a few per cent of a push.
//!
//! The first call asks the kernel and registers a `pthread_atfork` handler that stores the child's
//! own id in the child, before any of the child's code runs. Every fork made through the C
//! library (Ruby's `fork`, `Process.daemon`, Rust's `libc::fork`) runs the handler; a child made by
//! `vfork` or `posix_spawn` runs no code of ours before it `exec`s.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Once;

static PID: AtomicU32 = AtomicU32::new(0);
static HANDLER: Once = Once::new();
/// The handler could not be registered (`ENOMEM`): then the id is asked of the kernel every time.
static UNCACHED: AtomicBool = AtomicBool::new(false);

/// This process's id, as `std::process::id()` answers it.
pub fn current() -> u32 {
    let pid = PID.load(Ordering::Relaxed);
    if pid != 0 {
        return pid;
    }
    register();
    if UNCACHED.load(Ordering::Relaxed) {
        return std::process::id();
    }
    // A fork between the handler's registration and this store leaves the child its own id: the
    // forking thread is not this one, and this one does not exist in the child.
    let _ = PID.compare_exchange(0, std::process::id(), Ordering::Relaxed, Ordering::Relaxed);
    PID.load(Ordering::Relaxed)
}

#[cfg(unix)]
fn register() {
    extern "C" fn in_child() {
        // SAFETY: getpid is async-signal-safe and cannot fail.
        let pid = unsafe { libc::getpid() } as u32;
        PID.store(pid, Ordering::Relaxed);
    }
    HANDLER.call_once(|| {
        // SAFETY: registers a handler that only calls getpid and stores a number.
        if unsafe { libc::pthread_atfork(None, None, Some(in_child)) } != 0 {
            UNCACHED.store(true, Ordering::Relaxed);
        }
    });
}

#[cfg(not(unix))]
fn register() {
    UNCACHED.store(true, Ordering::Relaxed);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_forked_child_sees_its_own_id() {
        assert_eq!(current(), std::process::id());
        // SAFETY: the child only compares two numbers and exits.
        let child = unsafe { libc::fork() };
        assert!(child >= 0, "fork failed");
        if child == 0 {
            let ok = current() == std::process::id();
            // SAFETY: leaves the child without running the test harness's exit code.
            unsafe { libc::_exit(if ok { 0 } else { 1 }) };
        }
        let mut status = 0;
        // SAFETY: waits for the child forked above.
        unsafe { libc::waitpid(child, &mut status, 0) };
        assert!(
            libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
            "the child saw its parent's id"
        );
        assert_eq!(current(), std::process::id());
    }
}
