//! A running server process: the background work of one `bundle exec queue`.
//!
//! [`Server::start`] registers the process, beats once (recovering any dead process's jobs before it
//! takes new ones), then runs on a small shared runtime: the heartbeat (Sidekiq's, every 5 s), the
//! liveness beat, recovery and metrics flush (every 3 s), the scheduler (leading: awake when the next job is due and
//! at least every 25 ms; standing by: every 2 s), the paused queues' refresh (every 250 ms, `pause.rs`),
//! the recovery of dead gitlab-sidekiq-fetcher processes' jobs (every 3 s, `gitlab_fetch.rs`), and one
//! idle waiter per queue of each capsule. Processor threads get their work through
//! [`Server::fetcher`] (the default capsule) or [`Server::fetcher_in`] (a capsule of
//! `ServerConfig::capsules`, [`crate::capsules`]), on their own connections.
//!
//! Shutdown is explicit and ordered: [`Server::quiet`] stops handing out work; the processors finish
//! and close their fetchers (writing acks, requeueing prefetched jobs); [`Server::stop`] then ends the
//! background tasks and puts back whatever is still held — jobs of threads that outlived the timeout
//! included — so each job either finished or is back at the head of its queue.
//!
//! Under a service manager (`NOTIFY_SOCKET`), [`crate::supervisor`] reports readiness, status, the stop
//! and watchdog pings; [`Server::stopping`] marks where a stop begins.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::capsules::{self, CapsuleConfig};
use crate::cron::Crontab;
use crate::error::{Error, Result};
use crate::fetch::{calls, idle, FetchShared, Fetcher};
use crate::link::connection::{Conn, Redis};
use crate::supervisor::Supervisor;
use crate::{gitlab_fetch, heartbeat, limits, liveness, metrics, pause, scheduler};

/// What a server process is.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// `hostname:pid:<12 hex>`, as Sidekiq forms it.
    pub identity: String,
    /// Queues with their weights (1 or more), in priority order.
    pub queues: Vec<(String, u32)>,
    /// Try the queues in the order given on every fetch (Sidekiq's order when no queue has a weight;
    /// every weight must then be 1). Otherwise each fetch draws an order by weight.
    pub strict: bool,
    pub concurrency: usize,
    /// Most jobs one fetch takes for one thread.
    pub max_batch: usize,
    /// The `info` JSON of the process hash.
    pub info_json: String,
    /// Run the scheduler in this process (on by default; one leader runs at a time anyway).
    pub scheduler: bool,
    /// Put back the jobs of dead gitlab-sidekiq-fetcher processes, scanning for their working lists
    /// this often (`gitlab_fetch.rs`); `None`: never.
    pub gitlab_fetch_scan: Option<Duration>,
    /// Also write the data of Sidekiq's own Metrics page, in this Sidekiq version's keys.
    pub sidekiq_metrics: Option<metrics::sidekiq::Version>,
    /// Capsules besides the default one (`queues`, `strict` and `concurrency` above): each its own
    /// threads and queues ([`crate::capsules`]). Empty for a server of one capsule.
    pub capsules: Vec<CapsuleConfig>,
    /// Limit glibc's malloc to this many arenas before the server's threads start
    /// ([`crate::memory`]); `None`: leave malloc as it is.
    pub malloc_arena_max: Option<u32>,
    /// Give malloc's free pages back to the kernel this often ([`crate::memory::trim`]); `None`:
    /// never.
    pub malloc_trim_interval: Option<Duration>,
}

pub struct Server {
    /// The default capsule (`capsules[0]`).
    shared: Arc<FetchShared>,
    /// Every capsule, the default one first.
    capsules: Arc<Vec<Arc<FetchShared>>>,
    rt: tokio::runtime::Runtime,
    stop_tx: watch::Sender<bool>,
    tasks: Mutex<Vec<JoinHandle<()>>>,
    signals: Arc<Mutex<VecDeque<String>>>,
    supervisor: Arc<Supervisor>,
    pid: u32,
}

impl Server {
    /// Starts the server, reporting to the service manager named by `NOTIFY_SOCKET` if there is one
    /// (a `NOTIFY_SOCKET` or `WATCHDOG_USEC` that cannot be used is an error here).
    pub fn start(redis: Redis, config: ServerConfig) -> Result<Server> {
        let supervisor = Supervisor::from_env()
            .map_err(|e| Error::InvalidArgument(format!("systemd notification: {e}")))?;
        Server::start_supervised(redis, config, supervisor)
    }

    /// Starts the server reporting to `supervisor`.
    pub fn start_supervised(
        redis: Redis,
        config: ServerConfig,
        supervisor: Supervisor,
    ) -> Result<Server> {
        if config.concurrency == 0 {
            return Err(Error::InvalidArgument(
                "concurrency must be at least 1".to_owned(),
            ));
        }
        if let Some(max) = config.malloc_arena_max {
            crate::memory::limit_malloc_arenas(max);
        }
        let default = CapsuleConfig {
            name: capsules::DEFAULT.to_owned(),
            queues: config.queues.clone(),
            strict: config.strict,
            concurrency: config.concurrency,
        };
        let all = capsules::build(
            &redis,
            &config.identity,
            default,
            &config.capsules,
            config.max_batch,
            config.sidekiq_metrics,
        )?;
        let shared = all[0].clone();
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("queue-engine")
            .enable_all()
            .build()
            .map_err(|e| Error::closed_by("cannot start the engine runtime", e))?;

        let idle_lists: Vec<Vec<(String, String)>> =
            all.iter().map(|c| idle::working_lists(c)).collect();
        for (capsule, lists) in all.iter().zip(&idle_lists) {
            capsule.add_working_lists(lists);
        }
        rt.block_on(async {
            let mut conn = redis.conn();
            liveness::register(&mut conn, &config.identity, &idle_lists.concat()).await?;
            liveness::beat_and_recover_lists(
                &mut conn,
                &config.identity,
                &capsules::working_lists(&all),
            )
            .await?;
            heartbeat::beat_with(
                &mut conn,
                &config.identity,
                &capsules::busy(&all),
                false,
                &config.info_json,
            )
            .await?;
            // Before any idle waiter is armed, so none takes from a queue paused already.
            for capsule in &all {
                pause::refresh(&mut conn, capsule).await?;
            }
            Ok::<_, Error>(())
        })?;

        let (stop_tx, stop_rx) = watch::channel(false);
        let signals = Arc::new(Mutex::new(VecDeque::new()));
        let supervisor = Arc::new(supervisor);
        let mut tasks = Vec::new();
        tasks.push(rt.spawn(beat_loop(
            redis.conn(),
            all.to_vec(),
            config.info_json.clone(),
            signals.clone(),
            supervisor.clone(),
            stop_rx.clone(),
        )));
        for capsule in &all {
            tasks.push(rt.spawn(pause::watch(redis.conn(), capsule.clone(), stop_rx.clone())));
        }
        tasks.push(rt.spawn(limits::lease::keep(
            redis.conn(),
            all.to_vec(),
            stop_rx.clone(),
        )));
        tasks.push(rt.spawn(crate::batch::checker::run(redis.conn(), stop_rx.clone())));
        let all = Arc::new(all);
        tasks.extend(supervisor.spawn(&rt, all.clone(), stop_rx.clone()));
        if config.scheduler {
            tasks.push(rt.spawn(scheduler_loop(
                redis.conn(),
                config.identity.clone(),
                stop_rx.clone(),
            )));
        }
        if let Some(every) = config.malloc_trim_interval {
            tasks.push(rt.spawn(crate::memory::trim::run(every, stop_rx.clone())));
        }
        if let Some(every) = config.gitlab_fetch_scan {
            tasks.push(rt.spawn(gitlab_fetch::run(
                redis.conn(),
                gitlab_fetch::Recovery::new(&config.identity, every),
                stop_rx.clone(),
            )));
        }
        for (capsule, lists) in all.iter().zip(idle_lists) {
            for (index, (working, _)) in lists.into_iter().enumerate() {
                tasks.push(rt.spawn(idle::run(capsule.clone(), index, working)));
            }
        }
        Ok(Server {
            shared,
            capsules: all,
            rt,
            stop_tx,
            tasks: Mutex::new(tasks),
            signals,
            supervisor,
            pid: std::process::id(),
        })
    }

    pub fn identity(&self) -> &str {
        &self.shared.identity
    }

    /// This process's queues that it sees paused (as of its last read of the paused set).
    pub fn paused(&self) -> Vec<String> {
        let mut names: Vec<String> = Vec::new();
        for capsule in self.capsules.iter() {
            let order = &capsule.order;
            for i in (0..order.len()).filter(|&i| capsule.paused.is_paused(i)) {
                if !names.iter().any(|n| n == order.name(i)) {
                    names.push(order.name(i).to_owned());
                }
            }
        }
        names
    }

    fn check_pid(&self) -> Result<()> {
        if std::process::id() != self.pid {
            return Err(Error::closed(
                "this server belongs to the parent process; start a new one after fork".to_owned(),
            ));
        }
        Ok(())
    }

    /// A fetcher for one processor thread of the default capsule. The `concurrency`-th makes the
    /// process ready for a service manager.
    pub fn fetcher(&self, tid: &str) -> Result<Fetcher> {
        self.fetcher_in(0, tid)
    }

    /// A fetcher for one processor thread of capsule `capsule` (0: the default one, then
    /// `ServerConfig::capsules` in order).
    pub fn fetcher_in(&self, capsule: usize, tid: &str) -> Result<Fetcher> {
        self.check_pid()?;
        let shared = self.capsules.get(capsule).ok_or_else(|| {
            Error::InvalidArgument(format!(
                "no capsule {capsule} (this server has {})",
                self.capsules.len()
            ))
        })?;
        let fetcher = Fetcher::new(shared.clone(), tid)?;
        self.supervisor.fetcher_started(&self.capsules);
        Ok(fetcher)
    }

    fn quiet_all(&self) {
        for capsule in self.capsules.iter() {
            capsule.quiet();
        }
    }

    /// Stop handing out work (TSTP). Running jobs go on.
    pub fn quiet(&self) {
        self.quiet_all();
        self.supervisor.quiet(&self.capsules);
    }

    /// A stop begins (TERM/INT): quiet, and tell a service manager (`STOPPING=1`) before the
    /// processors are given the shutdown timeout. [`Server::stop`] ends it.
    pub fn stopping(&self) {
        self.quiet_all();
        self.supervisor.stopping(&self.capsules);
    }

    /// How many processor threads (of every capsule) are running a job now (for the process title).
    pub fn busy_count(&self) -> usize {
        capsules::busy_count(&self.capsules)
    }

    /// Signals (`TSTP`, `TERM`, `TTIN`) sent through the dashboard since the last call.
    pub fn take_signals(&self) -> Vec<String> {
        fetch_lock(&self.signals).drain(..).collect()
    }

    /// Ends the background work and puts every job this process still holds back on its queue.
    /// Call after the processors have finished or the shutdown timeout ran out. Returns how many jobs
    /// went back. Every step is attempted even when an earlier one failed (a job put back matters
    /// more than a tidy process list); the error names each step that failed.
    pub fn stop(&self) -> Result<usize> {
        self.check_pid()?;
        self.quiet_all();
        let _ = self.stop_tx.send(true);
        let tasks: Vec<_> = fetch_lock(&self.tasks).drain(..).collect();
        let shared = self.shared.clone();
        let all = self.capsules.clone();
        self.rt.block_on(async move {
            let mut conn = shared.redis.conn();
            end_tasks(&mut conn, &all, tasks).await;
            let mut failed = Vec::new();
            let mut moved = 0;
            for capsule in all.iter() {
                // The processors have finished: whatever they counted since the last beat goes now.
                if let Err(e) = metrics::flush::flush(&mut conn, &capsule.metrics).await {
                    failed.push(("flush the metrics counts", e));
                }
                match calls::requeue(&mut conn, &capsule.take_handoff()).await {
                    Ok(n) => moved += n,
                    Err(e) => failed.push(("put back handed-off jobs", e)),
                }
            }
            match liveness::recover(&mut conn, &shared.identity).await {
                Ok(n) => moved += n,
                Err(e) => failed.push(("put back held jobs", e)),
            }
            if let Err(e) = heartbeat::clear(&mut conn, &shared.identity).await {
                failed.push(("remove the process from `processes`", e));
            }
            if let Err(e) = scheduler::resign(&mut conn, &shared.identity).await {
                failed.push(("resign the scheduler lease", e));
            }
            if failed.is_empty() {
                Ok(moved)
            } else {
                Err(Error::incomplete("stop", failed))
            }
        })
    }
}

/// Waits for the background tasks to end. Idle waiters end their `BLMOVE` first (a blocked command is
/// never dropped mid-flight); `CLIENT UNBLOCK` makes that immediate instead of waiting out its timeout.
async fn end_tasks(conn: &mut Conn, all: &[Arc<FetchShared>], tasks: Vec<JoinHandle<()>>) {
    let give_up = tokio::time::Instant::now() + idle::BLOCK_FOR * 3;
    for mut task in tasks {
        loop {
            for id in capsules::blocked_clients(all) {
                let unblock = redis::cmd("CLIENT")
                    .arg("UNBLOCK")
                    .arg(id)
                    .arg("TIMEOUT")
                    .clone();
                let _ = conn.cmd::<i64>(&unblock).await;
            }
            let slice = tokio::time::timeout(Duration::from_millis(50), &mut task).await;
            if slice.is_ok() || tokio::time::Instant::now() >= give_up {
                break;
            }
        }
    }
}

fn fetch_lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

async fn beat_loop(
    mut conn: Conn,
    all: Vec<Arc<FetchShared>>,
    info_json: String,
    signals: Arc<Mutex<VecDeque<String>>>,
    supervisor: Arc<Supervisor>,
    mut stop: watch::Receiver<bool>,
) {
    let mut live = tokio::time::interval(liveness::BEAT_INTERVAL);
    let mut sidekiq = tokio::time::interval(heartbeat::INTERVAL);
    live.tick().await;
    sidekiq.tick().await;
    loop {
        tokio::select! {
            _ = stop.changed() => return,
            _ = live.tick() => {
                let identity = &all[0].identity;
                let lists = capsules::working_lists(&all);
                if let Err(e) = liveness::beat_and_recover_lists(&mut conn, identity, &lists).await {
                    tracing::warn!(error = %e, "liveness beat failed");
                }
                for capsule in &all {
                    if let Err(e) = metrics::flush::flush(&mut conn, &capsule.metrics).await {
                        tracing::warn!(error = %e, "metrics flush failed; kept for the next beat");
                    }
                }
                if let Err(e) = limits::pump(&mut conn).await {
                    tracing::warn!(error = %e, "resuming deferred jobs failed");
                }
            }
            _ = sidekiq.tick() => {
                let beat = heartbeat::beat_with(
                    &mut conn,
                    &all[0].identity,
                    &capsules::busy(&all),
                    all[0].is_quiet(),
                    &info_json,
                )
                .await;
                supervisor.beat_result(&beat);
                match beat {
                    Ok(Some(signal)) => fetch_lock(&signals).push_back(signal),
                    Ok(None) => {}
                    Err(e) => tracing::warn!(error = %e, "heartbeat failed"),
                }
            }
        }
    }
}

/// Runs [`scheduler::turn`] until stopped, sleeping what each turn says.
async fn scheduler_loop(mut conn: Conn, identity: String, mut stop: watch::Receiver<bool>) {
    let mut crontab = Crontab::new();
    loop {
        let pause = scheduler::turn_with_cron(&mut conn, &identity, Some(&mut crontab)).await;
        tokio::select! {
            _ = stop.changed() => return,
            _ = tokio::time::sleep(pause) => {}
        }
    }
}
