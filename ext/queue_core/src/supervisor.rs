//! What a server process tells its service manager (systemd `Type=notify`), and when, over
//! [`crate::notify`].
//!
//! - `READY=1` once every processor thread holds its fetcher: the process is registered, its first
//!   heartbeat is written, the idle waiters and scheduler run (all done in [`crate::server::Server::start`]),
//!   and the last fetcher of every capsule's threads (the total concurrency, [`crate::capsules`])
//!   has registered its working lists — the moment it can take work on every thread. A replacement fetcher (a processor thread that died) does not send it again.
//! - `STATUS=` lines: `starting`, `processing: 3 of 10 threads busy`, `quiet (taking no new jobs): …`,
//!   `stopping: waiting for 3 of 10 threads`, with the last heartbeat's Redis error appended while
//!   beats fail. Sent at once on each change of phase and at most once a second as the count moves.
//! - `STOPPING=1` when a stop begins (TERM/INT, before the shutdown timeout starts running).
//! - `WATCHDOG=1` every `WATCHDOG_USEC / 2` from a task on the engine's runtime, the one that beats.
//!   A ping proves the engine is alive (its runtime schedules, the process is not frozen), not that
//!   Redis answers: restarting a worker cannot cure Redis and would cut its running jobs short, so a
//!   Redis outage shows in `STATUS=` and the logs instead of in a restart loop.
//!
//! Without `NOTIFY_SOCKET` every call here returns at once and no task is spawned.

use std::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::capsules;
use crate::fetch::FetchShared;
use crate::notify::{self, Notifier, NotifyError};

/// How often the status line is recomputed (sent only when it changed).
pub const STATUS_EVERY: Duration = Duration::from_secs(1);

const STARTING: u8 = 0;
const RUNNING: u8 = 1;
const STOPPING: u8 = 2;

/// The service-manager side of one server process.
#[derive(Debug)]
pub struct Supervisor {
    notifier: Option<Notifier>,
    watchdog: Option<Duration>,
    phase: AtomicU8,
    fetchers: AtomicUsize,
    last_status: Mutex<String>,
    redis_error: Mutex<Option<String>>,
    /// The last send failed (so the next failure is not logged again).
    failing: AtomicBool,
}

impl Supervisor {
    /// From `NOTIFY_SOCKET`, `WATCHDOG_USEC` and `WATCHDOG_PID`; inert when `NOTIFY_SOCKET` is unset.
    pub fn from_env() -> Result<Supervisor, NotifyError> {
        let Some(notifier) = Notifier::from_env()? else {
            return Ok(Supervisor::new(None, None));
        };
        Ok(Supervisor::new(
            Some(notifier),
            notify::watchdog_interval_from_env()?,
        ))
    }

    /// `watchdog`: how often to ping (half of `WATCHDOG_USEC`), or `None` for no pings.
    pub fn new(notifier: Option<Notifier>, watchdog: Option<Duration>) -> Supervisor {
        Supervisor {
            notifier,
            watchdog,
            phase: AtomicU8::new(STARTING),
            fetchers: AtomicUsize::new(0),
            last_status: Mutex::new(String::new()),
            redis_error: Mutex::new(None),
            failing: AtomicBool::new(false),
        }
    }

    /// No service manager is listening.
    pub fn is_inert(&self) -> bool {
        self.notifier.is_none()
    }

    /// Starts the task that pings the watchdog and keeps the status line current, until `stop`.
    pub fn spawn(
        self: &Arc<Self>,
        rt: &tokio::runtime::Runtime,
        shared: Arc<Vec<Arc<FetchShared>>>,
        stop: watch::Receiver<bool>,
    ) -> Option<JoinHandle<()>> {
        if self.is_inert() {
            return None;
        }
        if let Some(every) = self.watchdog {
            tracing::info!(
                every_ms = every.as_millis() as u64,
                "pinging the systemd watchdog"
            );
        }
        Some(rt.spawn(self.clone().run(shared, stop)))
    }

    /// A processor thread got its fetcher; the last one of every capsule's threads makes the
    /// process ready.
    pub fn fetcher_started(&self, shared: &[Arc<FetchShared>]) {
        if self.is_inert() {
            return;
        }
        let started = self.fetchers.fetch_add(1, Ordering::SeqCst) + 1;
        if started >= threads(shared)
            && self
                .phase
                .compare_exchange(STARTING, RUNNING, Ordering::SeqCst, Ordering::SeqCst)
                .is_ok()
        {
            self.report(self.notifier.as_ref().map(Notifier::ready));
            self.update_status(shared);
        }
    }

    /// The process went quiet (TSTP): say so now.
    pub fn quiet(&self, shared: &[Arc<FetchShared>]) {
        self.update_status(shared);
    }

    /// A stop began: `STOPPING=1`, then the status.
    pub fn stopping(&self, shared: &[Arc<FetchShared>]) {
        if self.is_inert() || self.phase.swap(STOPPING, Ordering::SeqCst) == STOPPING {
            return;
        }
        self.report(self.notifier.as_ref().map(Notifier::stopping));
        self.update_status(shared);
    }

    /// The outcome of a heartbeat: a failure shows in the status until a beat succeeds.
    pub fn beat_result<T>(&self, result: &crate::Result<T>) {
        if self.is_inert() {
            return;
        }
        *lock(&self.redis_error) = result.as_ref().err().map(|e| e.to_string());
    }

    /// The status line for now.
    pub fn status_text(&self, shared: &[Arc<FetchShared>]) -> String {
        let busy = capsules::busy_count(shared);
        let threads = threads(shared);
        let mut text = match self.phase.load(Ordering::SeqCst) {
            STARTING => format!(
                "starting: {} of {threads} threads ready",
                self.fetchers.load(Ordering::SeqCst).min(threads)
            ),
            STOPPING => format!("stopping: waiting for {busy} of {threads} threads"),
            _ if shared.iter().all(|c| c.is_quiet()) => {
                format!("quiet (taking no new jobs): {busy} of {threads} threads busy")
            }
            _ => format!("processing: {busy} of {threads} threads busy"),
        };
        if let Some(error) = lock(&self.redis_error).as_ref() {
            text.push_str("; last heartbeat failed: ");
            text.push_str(error);
        }
        text
    }

    /// Sends the status line if it changed since the last one sent.
    fn update_status(&self, shared: &[Arc<FetchShared>]) {
        let Some(notifier) = &self.notifier else {
            return;
        };
        let text = self.status_text(shared);
        {
            let mut last = lock(&self.last_status);
            if *last == text {
                return;
            }
            last.clone_from(&text);
        }
        self.report(Some(notifier.status(&text)));
    }

    async fn run(
        self: Arc<Self>,
        shared: Arc<Vec<Arc<FetchShared>>>,
        mut stop: watch::Receiver<bool>,
    ) {
        let mut status = tokio::time::interval(STATUS_EVERY);
        let mut ping = self.watchdog.map(tokio::time::interval);
        loop {
            tokio::select! {
                _ = stop.changed() => return,
                _ = status.tick() => self.update_status(&shared),
                _ = tick(&mut ping) => {
                    self.report(self.notifier.as_ref().map(Notifier::watchdog));
                }
            }
        }
    }

    /// Logs a failed send once, and the recovery after it.
    fn report(&self, sent: Option<Result<(), NotifyError>>) {
        let Some(sent) = sent else {
            return;
        };
        let was_failing = self.failing.swap(sent.is_err(), Ordering::SeqCst);
        match sent {
            Err(e) if !was_failing => {
                tracing::warn!(error = %e, "cannot notify the service manager");
            }
            Ok(()) if was_failing => {
                tracing::info!("the service manager takes notifications again");
            }
            _ => {}
        }
    }
}

/// Processor threads of every capsule.
fn threads(shared: &[Arc<FetchShared>]) -> usize {
    shared.iter().map(|c| c.concurrency).sum()
}

/// The next tick of `interval`; never, without one.
async fn tick(interval: &mut Option<tokio::time::Interval>) {
    match interval {
        Some(interval) => {
            interval.tick().await;
        }
        None => std::future::pending().await,
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}
