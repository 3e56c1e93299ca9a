//! `queue_core`: the engine of the `queue` gem.
//!
//! It stores and moves jobs in Redis in Sidekiq's wire format, so Sidekiq's client, API and dashboard
//! work against the same data; on top of that format it adds what Sidekiq lacks: a reliable fetch that
//! no crash can make lose a job, recovery of a dead process's jobs within seconds, an atomic and
//! punctual scheduler, and batched acknowledgements. It knows nothing of Ruby: the binding in
//! `ext/queue` calls it, and `cargo test` runs it against a real Redis.
//!
//! Map: [`keys`] names every key; [`client`] pushes; [`dedup`] deduplicates pushes (GitLab's idempotent jobs); [`fetch`] takes and acknowledges work;
//! [`retry`] decides what a failure becomes and [`settle`] files it; [`liveness`] finds dead processes
//! and puts their work back; [`scheduler`] moves due jobs; [`heartbeat`] publishes the process;
//! [`server`] runs all of it for one process (its [`capsules`] each a group of threads), and [`supervisor`] reports it to systemd over [`notify`];
//! [`api`] reads and administers (the inspection API); [`metrics`] counts and exposes Prometheus
//! metrics; [`limits`] holds back jobs over a worker's concurrency or rate limit; [`migrate`] renames a queue and [`shard_move`] moves one to another shard; [`iterable`] keeps iterable jobs' progress. How all of it reaches Redis (connections, dialling, waiting
//! on replies) is the room [`link`].

pub mod api;
pub mod batch;
pub mod capsules;
pub mod client;
pub mod clock;
pub mod cron;
pub mod dedup;
pub mod error;
pub mod fetch;
pub mod gitlab_fetch;
pub mod heartbeat;
pub mod iterable;
pub mod job;
mod job_json;
pub mod job_lines;
pub mod job_outline;
pub mod keys;
pub mod limits;
pub mod link;
pub mod liveness;
pub mod memory;
pub mod metrics;
pub mod migrate;
pub mod notify;
pub mod ordered;
pub mod pause;
pub mod plain_json;
pub mod resp;
pub mod retry;
pub mod scheduler;
pub mod scripts;
pub mod server;
pub mod settle;
pub mod shard_move;
pub mod supervisor;
pub mod thread_policy;

pub use error::{Error, Result};
pub use link::connect_error::{ConnectError, ConnectErrorKind};
pub use link::connection::{Redis, RedisConfig};
