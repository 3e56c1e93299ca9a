//! Capsules (Sidekiq 7's `config.capsule("name") { |c| c.concurrency = 1; c.queues = %w[x] }`): one
//! process runs several groups of processor threads, each with its own queues (weighted or strict)
//! and its own concurrency, under one identity, one heartbeat and one set of background tasks.
//!
//! A capsule is a [`FetchShared`]: its queue order, its threads' hand-off and stealing, its idle
//! waiters (one per queue, working list slot `idle` for the default capsule and `idle-<name>` for
//! the others, so two capsules may share a queue), its busy jobs and its metrics tally. Nothing
//! crosses between capsules: a thread of capsule `x` only ever gets a job of `x`'s queues, so a
//! capsule of concurrency 1 never runs two jobs at once. The server ([`crate::server`]) keeps the
//! list, index 0 the default capsule; the process-wide tasks (heartbeat, liveness beat, metrics
//! flush, stop) go over all of them through the helpers here.

use std::sync::Arc;

use crate::error::{Error, Result};
use crate::fetch::{Busy, FetchShared, QueueOrder};
use crate::link::connection::Redis;
use crate::metrics::sidekiq::Version as SidekiqVersion;

/// Name of the capsule the server's own queues and concurrency form.
pub const DEFAULT: &str = "default";

/// One capsule's settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CapsuleConfig {
    pub name: String,
    /// Queues with their weights, in priority order.
    pub queues: Vec<(String, u32)>,
    /// Strict order (every weight 1, tried in the order given) or weighted random.
    pub strict: bool,
    pub concurrency: usize,
}

/// Builds the capsules: `default` first, then `others` in the order given. A capsule without
/// queues, with concurrency 0, or with a name used twice is an [`Error::InvalidArgument`] naming it.
pub fn build(
    redis: &Redis,
    identity: &str,
    default: CapsuleConfig,
    others: &[CapsuleConfig],
    max_batch: usize,
    sidekiq_metrics: Option<SidekiqVersion>,
) -> Result<Vec<Arc<FetchShared>>> {
    let mut names: Vec<&str> = Vec::new();
    let mut all = Vec::new();
    for capsule in std::iter::once(&default).chain(others) {
        if names.contains(&capsule.name.as_str()) {
            return Err(Error::InvalidArgument(format!(
                "capsule {:?} is defined twice",
                capsule.name
            )));
        }
        names.push(&capsule.name);
        if capsule.concurrency == 0 {
            return Err(Error::InvalidArgument(format!(
                "capsule {:?}: concurrency must be at least 1",
                capsule.name
            )));
        }
        let order = QueueOrder::new(capsule.queues.clone(), capsule.strict)
            .map_err(|e| Error::InvalidArgument(format!("capsule {:?}: {e}", capsule.name)))?;
        let idle_slot = if capsule.name == DEFAULT {
            crate::fetch::idle::SLOT.to_owned()
        } else {
            format!("{}-{}", crate::fetch::idle::SLOT, capsule.name)
        };
        all.push(FetchShared::for_capsule(
            redis.clone(),
            identity,
            order,
            capsule.concurrency,
            max_batch,
            sidekiq_metrics,
            idle_slot,
        ));
    }
    Ok(all)
}

/// The jobs running now in every capsule.
pub fn busy(capsules: &[Arc<FetchShared>]) -> Vec<Busy> {
    capsules.iter().flat_map(|c| c.busy()).collect()
}

/// How many threads of every capsule run a job now.
pub fn busy_count(capsules: &[Arc<FetchShared>]) -> usize {
    capsules.iter().map(|c| c.busy_count()).sum()
}

/// Every working list of every capsule, as (key, queue).
pub fn working_lists(capsules: &[Arc<FetchShared>]) -> Vec<(String, String)> {
    capsules.iter().flat_map(|c| c.working_lists()).collect()
}

/// Idle waiters' client ids blocked now, in every capsule.
pub fn blocked_clients(capsules: &[Arc<FetchShared>]) -> Vec<i64> {
    capsules.iter().flat_map(|c| c.blocked_clients()).collect()
}
