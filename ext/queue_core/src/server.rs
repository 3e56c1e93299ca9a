//! A running server process: the background work of one `bundle exec queue`.
//!
//! [`Server::start`] registers the process, beats once (recovering any dead process's jobs before it
//! takes new ones), then runs on a small shared runtime: the heartbeat (Sidekiq's, every 5 s), the
//! liveness beat and recovery (every 3 s), the scheduler, and one idle waiter per queue. Processor
//! threads get their work through [`Server::fetcher`], on their own connections.
//!
//! Shutdown is explicit and ordered: [`Server::quiet`] stops handing out work; the processors finish
//! and close their fetchers (writing acks, requeueing prefetched jobs); [`Server::stop`] then ends the
//! background tasks and puts back whatever is still held — jobs of threads that outlived the timeout
//! included — so each job either finished or is back at the head of its queue.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::connection::{Conn, Redis};
use crate::error::{Error, Result};
use crate::fetch::{self, idle, recovery, FetchShared, Fetcher, QueueOrder};
use crate::{heartbeat, scheduler};

/// What a server process is.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// `hostname:pid:<12 hex>`, as Sidekiq forms it.
    pub identity: String,
    /// Queues with their weights, in priority order.
    pub queues: Vec<(String, u32)>,
    pub concurrency: usize,
    /// Most jobs one fetch takes for one thread.
    pub max_batch: usize,
    /// The `info` JSON of the process hash.
    pub info_json: String,
    /// Run the scheduler in this process (on by default; one leader runs at a time anyway).
    pub scheduler: bool,
}

pub struct Server {
    shared: Arc<FetchShared>,
    rt: tokio::runtime::Runtime,
    stop_tx: watch::Sender<bool>,
    tasks: Mutex<Vec<JoinHandle<()>>>,
    signals: Arc<Mutex<VecDeque<String>>>,
    pid: u32,
}

impl Server {
    pub fn start(redis: Redis, config: ServerConfig) -> Result<Server> {
        if config.concurrency == 0 {
            return Err(Error::InvalidArgument(
                "concurrency must be at least 1".to_owned(),
            ));
        }
        let order = QueueOrder::new(config.queues.clone())?;
        let shared = FetchShared::new(
            redis.clone(),
            &config.identity,
            order,
            config.concurrency,
            config.max_batch,
        );
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("queue-engine")
            .enable_all()
            .build()
            .map_err(|e| Error::Closed(format!("cannot start the engine runtime: {e}")))?;

        let idle_lists = idle::working_lists(&shared);
        shared.add_working_lists(&idle_lists);
        rt.block_on(async {
            let mut conn = redis.conn();
            recovery::register(&mut conn, &config.identity, &idle_lists).await?;
            liveness(&mut conn, &shared).await?;
            heartbeat::beat(&mut conn, &shared, &config.info_json).await?;
            Ok::<_, Error>(())
        })?;

        let (stop_tx, stop_rx) = watch::channel(false);
        let signals = Arc::new(Mutex::new(VecDeque::new()));
        let mut tasks = Vec::new();
        tasks.push(rt.spawn(beat_loop(
            redis.conn(),
            shared.clone(),
            config.info_json.clone(),
            signals.clone(),
            stop_rx.clone(),
        )));
        if config.scheduler {
            tasks.push(rt.spawn(scheduler_loop(
                redis.conn(),
                config.identity.clone(),
                stop_rx.clone(),
            )));
        }
        for (working, queue) in idle_lists {
            tasks.push(rt.spawn(idle::run(shared.clone(), queue, working)));
        }
        Ok(Server {
            shared,
            rt,
            stop_tx,
            tasks: Mutex::new(tasks),
            signals,
            pid: std::process::id(),
        })
    }

    pub fn identity(&self) -> &str {
        &self.shared.identity
    }

    fn check_pid(&self) -> Result<()> {
        if std::process::id() != self.pid {
            return Err(Error::Closed(
                "this server belongs to the parent process; start a new one after fork".to_owned(),
            ));
        }
        Ok(())
    }

    /// A fetcher for one processor thread.
    pub fn fetcher(&self, tid: &str) -> Result<Fetcher> {
        self.check_pid()?;
        Fetcher::new(self.shared.clone(), tid)
    }

    /// Stop handing out work (TSTP). Running jobs go on.
    pub fn quiet(&self) {
        self.shared.quiet();
    }

    /// Signals (`TSTP`, `TERM`, `TTIN`) sent through the dashboard since the last call.
    pub fn take_signals(&self) -> Vec<String> {
        fetch_lock(&self.signals).drain(..).collect()
    }

    /// Ends the background work and puts every job this process still holds back on its queue.
    /// Call after the processors have finished or the shutdown timeout ran out. Returns how many jobs
    /// went back.
    pub fn stop(&self) -> Result<usize> {
        self.check_pid()?;
        self.shared.quiet();
        let _ = self.stop_tx.send(true);
        let tasks: Vec<_> = fetch_lock(&self.tasks).drain(..).collect();
        let shared = self.shared.clone();
        self.rt.block_on(async move {
            let mut conn = shared.redis.conn();
            end_tasks(&mut conn, &shared, tasks).await;
            let acks = shared.take_stale_acks(Duration::ZERO);
            fetch::write_acks(&mut conn, &shared, &acks).await?;
            let mut moved = fetch::requeue(&mut conn, &shared.take_handoff()).await?;
            moved += recovery::recover(&mut conn, &shared.identity).await?;
            heartbeat::clear(&mut conn, &shared.identity).await?;
            scheduler::resign(&mut conn, &shared.identity).await?;
            Ok(moved)
        })
    }
}

/// Waits for the background tasks to end. Idle waiters end their `BLMOVE` first (a blocked command is
/// never dropped mid-flight); `CLIENT UNBLOCK` makes that immediate instead of waiting out its timeout.
async fn end_tasks(conn: &mut Conn, shared: &FetchShared, tasks: Vec<JoinHandle<()>>) {
    let give_up = tokio::time::Instant::now() + idle::BLOCK_FOR * 3;
    for mut task in tasks {
        loop {
            for id in shared.blocked_clients() {
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

async fn liveness(conn: &mut Conn, shared: &FetchShared) -> Result<()> {
    let dead = recovery::beat(conn, Some(&shared.identity), &shared.working_lists()).await?;
    for identity in dead {
        let moved = recovery::recover(conn, &identity).await?;
        tracing::warn!(
            process = %identity,
            jobs = moved,
            "a process stopped beating; its unfinished jobs are back in their queues"
        );
    }
    Ok(())
}

async fn beat_loop(
    mut conn: Conn,
    shared: Arc<FetchShared>,
    info_json: String,
    signals: Arc<Mutex<VecDeque<String>>>,
    mut stop: watch::Receiver<bool>,
) {
    let mut live = tokio::time::interval(recovery::BEAT_INTERVAL);
    let mut sidekiq = tokio::time::interval(heartbeat::INTERVAL);
    live.tick().await;
    sidekiq.tick().await;
    loop {
        tokio::select! {
            _ = stop.changed() => return,
            _ = live.tick() => {
                if let Err(e) = liveness(&mut conn, &shared).await {
                    tracing::warn!(error = %e, "liveness beat failed");
                }
            }
            _ = sidekiq.tick() => match heartbeat::beat(&mut conn, &shared, &info_json).await {
                Ok(Some(signal)) => fetch_lock(&signals).push_back(signal),
                Ok(None) => {}
                Err(e) => tracing::warn!(error = %e, "heartbeat failed"),
            },
        }
    }
}

async fn scheduler_loop(mut conn: Conn, identity: String, mut stop: watch::Receiver<bool>) {
    loop {
        let pause = match scheduler::poll(&mut conn, &identity).await {
            Ok(Some(0)) => scheduler::POLL,
            Ok(Some(_)) => {
                if let Err(e) = scheduler::enqueue_due(&mut conn).await {
                    tracing::warn!(error = %e, "scheduler failed to enqueue due jobs");
                }
                scheduler::POLL
            }
            Ok(None) => scheduler::STANDBY,
            Err(e) => {
                tracing::warn!(error = %e, "scheduler cannot reach Redis");
                scheduler::STANDBY
            }
        };
        tokio::select! {
            _ = stop.changed() => return,
            _ = tokio::time::sleep(pause) => {}
        }
    }
}
