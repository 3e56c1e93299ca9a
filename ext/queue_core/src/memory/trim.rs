//! A server's periodic `malloc_trim(0)`: glibc gives back to the kernel the whole pages inside its
//! arenas' free chunks. A server's heaps keep the high-water mark of what its jobs allocated; the
//! garbage the minor GC frees (lib/queue/malloc_gc.rb) becomes holes that stay resident until a
//! trim releases them. Measured on the `-c 10` mix (ARCHITECTURE.md, "Memory"): ~0.5 ms of CPU a
//! trim, 2-3 MB less RSS with a trim every 5 s.

use std::time::Duration;

use tokio::sync::watch;

/// Trims malloc every `every` until `stop` changes, on the runtime's blocking pool (a trim takes
/// each arena's lock in turn and may wait for it; it never holds up the runtime's workers).
pub async fn run(every: Duration, mut stop: watch::Receiver<bool>) {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await;
    loop {
        tokio::select! {
            _ = stop.changed() => return,
            _ = tick.tick() => {
                if let Err(e) = tokio::task::spawn_blocking(trim).await {
                    tracing::warn!(error = %e, "malloc_trim failed");
                }
            }
        }
    }
}

/// Gives malloc's free whole pages back to the kernel. Returns whether any were (false where malloc
/// is not glibc's).
pub fn trim() -> bool {
    trim_now()
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn trim_now() -> bool {
    // SAFETY: malloc_trim only releases free memory, under malloc's own locks.
    unsafe { libc::malloc_trim(0) == 1 }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn trim_now() -> bool {
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn trims_until_stopped() {
        let (stop_tx, stop_rx) = watch::channel(false);
        let task = tokio::spawn(run(Duration::from_millis(5), stop_rx));
        tokio::time::sleep(Duration::from_millis(30)).await;
        assert!(!task.is_finished());
        stop_tx.send_replace(true);
        let ended = tokio::time::timeout(Duration::from_secs(5), task).await;
        assert!(matches!(ended, Ok(Ok(()))));
    }
}
