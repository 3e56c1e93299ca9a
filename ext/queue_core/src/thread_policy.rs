//! How the kernel schedules the threads that run jobs.
//!
//! A server's job threads are Ruby threads of one process: they take turns on its one GVL. When a
//! job thread wakes (its `sleep`, its database reply, a fetch's reply) while every core is busy, the
//! kernel's default policy lets it preempt the running thread. If that thread held the GVL, the woken
//! one runs only to find the lock taken and sleep again, and the holder waits to be put back: two
//! switches, and the lock idle between them. Linux's `SCHED_BATCH` policy is the default policy
//! without that preemption on wake-up: the thread still gets its fair share of the CPU at the same
//! nice value, but waits for the running thread's slice to end or for it to block (which a job
//! thread does as soon as its job waits again). ARCHITECTURE.md, "Job threads under `SCHED_BATCH`",
//! has the measurements.
//!
//! Only a thread under the default policy is moved: one a process was started under with another
//! (`chrt`, a real-time policy, `SCHED_IDLE`) keeps it.

use std::fmt;

use thiserror::Error as ThisError;

/// The kernel's scheduling policy of a thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    /// `SCHED_OTHER`, every thread's policy unless someone chose another.
    Normal,
    /// `SCHED_BATCH`: as `Normal`, but a waking thread does not preempt the running one.
    Batch,
    /// `SCHED_IDLE`: runs only when nothing else would.
    Idle,
    /// `SCHED_FIFO`, real-time.
    Fifo,
    /// `SCHED_RR`, real-time.
    RoundRobin,
    /// A policy this module has no name for (`SCHED_DEADLINE`, ...): the kernel's number.
    Other(i32),
}

impl fmt::Display for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Policy::Normal => f.write_str("normal"),
            Policy::Batch => f.write_str("batch"),
            Policy::Idle => f.write_str("idle"),
            Policy::Fifo => f.write_str("fifo"),
            Policy::RoundRobin => f.write_str("rr"),
            Policy::Other(n) => write!(f, "policy {n}"),
        }
    }
}

#[derive(Debug, ThisError)]
pub enum PolicyError {
    /// The system has no per-thread scheduling policies this module can set (it is not Linux).
    #[error("thread scheduling policies are set on Linux only")]
    Unsupported,
    /// The kernel refused to read or change the thread's policy (a seccomp filter, say).
    #[error("the kernel refused to {action} this thread's scheduling policy: {source}")]
    Refused {
        action: &'static str,
        #[source]
        source: std::io::Error,
    },
}

/// The calling thread's policy.
pub fn current() -> Result<Policy, PolicyError> {
    imp::current()
}

/// Moves the calling thread from the default policy to `SCHED_BATCH` (at the same nice value) and
/// returns its policy after: `Batch`, or the other policy it was started under, which it keeps.
pub fn batch_current_thread() -> Result<Policy, PolicyError> {
    match current()? {
        Policy::Normal => {
            imp::set_batch()?;
            current()
        }
        kept => Ok(kept),
    }
}

#[cfg(target_os = "linux")]
mod imp {
    use super::{Policy, PolicyError};

    /// `SCHED_RESET_ON_FORK`, which the kernel may or into a policy it reports.
    const RESET_ON_FORK: libc::c_int = 0x4000_0000;

    pub fn current() -> Result<Policy, PolicyError> {
        // SAFETY: pid 0 is the calling thread; the call reads only.
        let policy = unsafe { libc::sched_getscheduler(0) };
        if policy < 0 {
            return Err(refused("read"));
        }
        Ok(match policy & !RESET_ON_FORK {
            libc::SCHED_OTHER => Policy::Normal,
            libc::SCHED_BATCH => Policy::Batch,
            libc::SCHED_IDLE => Policy::Idle,
            libc::SCHED_FIFO => Policy::Fifo,
            libc::SCHED_RR => Policy::RoundRobin,
            n => Policy::Other(n),
        })
    }

    pub fn set_batch() -> Result<(), PolicyError> {
        let param = libc::sched_param { sched_priority: 0 };
        // SAFETY: pid 0 is the calling thread (Linux sets policies per thread); `param` outlives the
        // call. Moving between SCHED_OTHER and SCHED_BATCH needs no privilege.
        if unsafe { libc::sched_setscheduler(0, libc::SCHED_BATCH, &param) } != 0 {
            return Err(refused("change"));
        }
        Ok(())
    }

    fn refused(action: &'static str) -> PolicyError {
        PolicyError::Refused {
            action,
            source: std::io::Error::last_os_error(),
        }
    }
}

#[cfg(not(target_os = "linux"))]
mod imp {
    use super::{Policy, PolicyError};

    pub fn current() -> Result<Policy, PolicyError> {
        Err(PolicyError::Unsupported)
    }

    pub fn set_batch() -> Result<(), PolicyError> {
        Err(PolicyError::Unsupported)
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    #[test]
    fn moves_only_the_calling_thread() {
        let other = std::thread::spawn(|| {
            let (tx, rx) = std::sync::mpsc::channel();
            let moved = std::thread::spawn(move || {
                let before = current().map_err(|e| e.to_string());
                let after = batch_current_thread().map_err(|e| e.to_string());
                tx.send(()).ok();
                (before, after)
            });
            rx.recv().ok();
            let (before, after) = moved.join().expect("thread");
            (before, after, current().map_err(|e| e.to_string()))
        });
        let (before, after, sibling) = other.join().expect("thread");
        assert_eq!(before, Ok(Policy::Normal));
        assert_eq!(after, Ok(Policy::Batch));
        assert_eq!(
            sibling,
            Ok(Policy::Normal),
            "the spawning thread keeps its policy"
        );
        assert_eq!(current().ok(), Some(Policy::Normal));
    }

    #[test]
    fn keeps_a_policy_chosen_by_someone_else() {
        let kept = std::thread::spawn(|| {
            let param = libc::sched_param { sched_priority: 0 };
            // SAFETY: as in `imp::set_batch`; SCHED_IDLE needs no privilege either.
            let set = unsafe { libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) };
            assert_eq!(set, 0, "{}", std::io::Error::last_os_error());
            batch_current_thread().map_err(|e| e.to_string())
        })
        .join()
        .expect("thread");
        assert_eq!(kept, Ok(Policy::Idle));
    }
}
