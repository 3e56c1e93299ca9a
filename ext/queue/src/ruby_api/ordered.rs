//! Ordered jobs (Lowkiq's model, `queue_core::ordered`) for Ruby.
//!
//! - `Engine#ordered_push`, `#ordered_stats`, `#ordered_shards`, `#ordered_morgue`, `#ordered_admin`:
//!   the client and the dashboard, on the calling thread's synchronous connection with the GVL
//!   released, as `push` is;
//! - `Engine#start_ordered` → `JobQueue::Native::OrderedShards`: a server process's shard leases (the
//!   beat thread of `ordered::runner`), and the factory of each processor thread's
//!   `JobQueue::Native::OrderedFetcher`, which settles a batch and fetches the next in one call.
//!
//! A queue is named to the engine by `[name, shards_count]`; everything else (payload format, retry
//! delays, the worker's code) stays in Ruby. Payloads cross as binary strings: the engine never parses
//! them.

use std::sync::{Mutex, MutexGuard, PoisonError};

use magnus::{prelude::*, Error, RArray, RString, Ruby, Value};
use queue_core::link::blocking::SyncConn;
use queue_core::ordered::fetch::{Batch, OrderedFetcher as CoreFetcher, Scheduler};
use queue_core::ordered::lease::{Ownership, Splitter};
use queue_core::ordered::morgue::{self, MorgueOrder};
use queue_core::ordered::push::{self, NewJob};
use queue_core::ordered::runner;
use queue_core::ordered::settle::{Outcome, Settled};
use queue_core::ordered::shards;
use queue_core::ordered::{stats, OrderedQueue};
use queue_core::Redis;

use super::bytes_of;
use super::engine::{with_sync, Engine};
use crate::errors::{blocking, to_ruby};

fn queue_of(engine: &Engine, name: &str, shards_count: u32) -> Result<OrderedQueue, Error> {
    OrderedQueue::new(engine.redis.keys().namespace(), name, shards_count).map_err(to_ruby)
}

fn arg_error(ruby: &Ruby, message: String) -> Error {
    Error::new(ruby.exception_arg_error(), message)
}

/// `[[payload, score], ...]` with payloads as binary strings.
fn payloads_to_ruby(ruby: &Ruby, payloads: &[(Vec<u8>, f64)]) -> Result<RArray, Error> {
    let out = ruby.ary_new_capa(payloads.len());
    for (payload, score) in payloads {
        out.push((ruby.str_from_slice(payload), *score))?;
    }
    Ok(out)
}

impl Engine {
    /// `ordered_push(queue, shards_count, [[id, payload, score, perform_in], ...])`: merges the jobs
    /// in with one script call. Returns how many ids were newly queued.
    fn ordered_push(&self, queue: String, shards_count: u32, jobs: RArray) -> Result<usize, Error> {
        let queue = queue_of(self, &queue, shards_count)?;
        let mut new_jobs = Vec::with_capacity(jobs.len());
        for job in jobs.into_iter() {
            let (id, payload, score, perform_in): (String, RString, f64, f64) =
                magnus::TryConvert::try_convert(job)?;
            new_jobs.push(NewJob {
                id,
                payload: bytes_of(payload),
                score,
                perform_in,
            });
        }
        let (redis, id) = (&self.redis, self.id);
        blocking(move || with_sync(redis, id, |c| push::push(c, &queue, &new_jobs)))
    }

    /// `ordered_stats([[worker_name, queue, shards_count], ...])`: Lowkiq's `/api/v1/stats`
    /// document, as a JSON string.
    fn ordered_stats(&self, workers: Vec<(String, String, u32)>) -> Result<String, Error> {
        let queues = workers
            .iter()
            .map(|(name, queue, shards)| Ok((name.clone(), queue_of(self, queue, *shards)?)))
            .collect::<Result<Vec<_>, Error>>()?;
        let (redis, id) = (&self.redis, self.id);
        blocking(move || {
            let pairs: Vec<(&str, &OrderedQueue)> =
                queues.iter().map(|(n, q)| (n.as_str(), q)).collect();
            with_sync(redis, id, |c| stats::stats(c, &pairs)).map(|doc| doc.to_string())
        })
    }

    /// `ordered_shards(queue, shards_count)`: every shard, `[[index, length, lag, busy, owner_or_nil,
    /// last_beat_or_nil, lease_expires_at_or_nil, alive], ...]` (times in Redis seconds).
    fn ordered_shards(
        ruby: &Ruby,
        rb_self: &Self,
        queue: String,
        shards_count: u32,
    ) -> Result<RArray, Error> {
        let queue = queue_of(rb_self, &queue, shards_count)?;
        let (redis, id) = (&rb_self.redis, rb_self.id);
        let all = blocking(move || with_sync(redis, id, |c| shards::shards(c, &queue)))?;
        let out = ruby.ary_new_capa(all.len());
        for s in all {
            let owner = s.owner.as_ref();
            let row = ruby.ary_new_capa(8);
            row.push(s.index)?;
            row.push(s.length)?;
            row.push(s.lag)?;
            row.push(s.busy)?;
            row.push(owner.map(|o| o.identity.clone()))?;
            row.push(owner.and_then(|o| o.last_beat))?;
            row.push(owner.and_then(|o| o.expires_at))?;
            row.push(owner.is_some_and(|o| o.alive))?;
            out.push(row)?;
        }
        Ok(out)
    }

    /// `ordered_morgue(queue, shards_count, order, descending, offset, limit)`, order `"id"` or
    /// `"updated_at"`: `[[id, updated_at, error, [[payload, score], ...]], ...]`.
    #[allow(clippy::too_many_arguments)]
    fn ordered_morgue(
        ruby: &Ruby,
        rb_self: &Self,
        queue: String,
        shards_count: u32,
        order: String,
        descending: bool,
        offset: usize,
        limit: usize,
    ) -> Result<RArray, Error> {
        let order = match order.as_str() {
            "id" => MorgueOrder::Id,
            "updated_at" => MorgueOrder::UpdatedAt,
            other => {
                return Err(arg_error(
                    ruby,
                    format!("unknown morgue order {other:?}; use id or updated_at"),
                ))
            }
        };
        let queue = queue_of(rb_self, &queue, shards_count)?;
        let (redis, id) = (&rb_self.redis, rb_self.id);
        let jobs = blocking(move || {
            with_sync(redis, id, |c| {
                morgue::list(c, &queue, order, descending, offset, limit)
            })
        })?;
        let out = ruby.ary_new_capa(jobs.len());
        for job in jobs {
            out.push((
                job.id,
                job.updated_at,
                job.error,
                payloads_to_ruby(ruby, &job.payloads)?,
            ))?;
        }
        Ok(out)
    }

    /// `ordered_admin(queue, shards_count, action, ids)`: `requeue`/`delete` (the given morgue ids),
    /// `requeue_all`, `delete_all`, `perform_all_jobs_now`, `kill_all_failed_jobs`,
    /// `delete_all_failed_jobs`. Returns how many ids it changed.
    fn ordered_admin(
        ruby: &Ruby,
        rb_self: &Self,
        queue: String,
        shards_count: u32,
        action: String,
        ids: Vec<String>,
    ) -> Result<u64, Error> {
        type Action = fn(&mut SyncConn, &OrderedQueue, &[String]) -> queue_core::Result<u64>;
        let run: Action = match action.as_str() {
            "requeue" => morgue::requeue,
            "delete" => morgue::delete,
            "requeue_all" => |c, q, _| morgue::requeue_all(c, q),
            "delete_all" => |c, q, _| morgue::delete_all(c, q),
            "perform_all_jobs_now" => |c, q, _| morgue::perform_all_jobs_now(c, q),
            "kill_all_failed_jobs" => |c, q, _| morgue::kill_all_failed_jobs(c, q),
            "delete_all_failed_jobs" => |c, q, _| morgue::delete_all_failed_jobs(c, q),
            other => {
                return Err(arg_error(
                    ruby,
                    format!("unknown ordered admin action {other:?}"),
                ))
            }
        };
        let queue = queue_of(rb_self, &queue, shards_count)?;
        let (redis, id) = (&rb_self.redis, rb_self.id);
        blocking(move || with_sync(redis, id, |c| run(c, &queue, &ids)))
    }

    /// `start_ordered(identity, [[queue, shards_count], ...], splitter)`: claims this process's shards
    /// (first beat, recovering abandoned in-flight state) and starts the beat thread. `splitter` is
    /// `"balanced"`, `"default"` or `["by_node", number_of_nodes, node_number]`; for `by_node` each
    /// queue's offset is the shard count of the queues listed before it, as Lowkiq lays them out.
    fn start_ordered(
        ruby: &Ruby,
        rb_self: &Self,
        identity: String,
        queues: Vec<(String, u32)>,
        splitter: Value,
    ) -> Result<OrderedShards, Error> {
        let by_node: Option<(String, u32, u32)> = if splitter.is_kind_of(ruby.class_array()) {
            Some(magnus::TryConvert::try_convert(splitter)?)
        } else {
            None
        };
        let name = match &by_node {
            Some((name, _, _)) => name.clone(),
            None => String::try_convert(splitter)?,
        };
        let mut owners = Vec::with_capacity(queues.len());
        let mut offset = 0u32;
        for (name_of_queue, shards_count) in &queues {
            let split = match (name.as_str(), &by_node) {
                ("balanced", None) => Splitter::Balanced,
                ("default", None) => Splitter::Default,
                ("by_node", Some((_, number_of_nodes, node_number))) => Splitter::ByNode {
                    number_of_nodes: *number_of_nodes,
                    node_number: *node_number,
                    offset,
                },
                _ => {
                    return Err(arg_error(
                        ruby,
                        format!("unknown ordered splitter {splitter:?}; use \"balanced\", \"default\" or [\"by_node\", nodes, node]"),
                    ))
                }
            };
            offset = offset.saturating_add(*shards_count);
            let queue = queue_of(rb_self, name_of_queue, *shards_count)?;
            owners.push(Ownership::new(queue, &identity, split).map_err(to_ruby)?);
        }
        let redis = rb_self.redis.clone();
        let shards = blocking(move || runner::OrderedShards::start(&redis, owners))?;
        Ok(OrderedShards {
            inner: Mutex::new(Some(shards)),
            redis: rb_self.redis.clone(),
            identity,
        })
    }
}

/// `JobQueue::Native::OrderedShards`: one server process's leases on its ordered queues' shards.
#[magnus::wrap(class = "JobQueue::Native::OrderedShards", free_immediately, size)]
pub struct OrderedShards {
    inner: Mutex<Option<runner::OrderedShards>>,
    redis: Redis,
    identity: String,
}

impl OrderedShards {
    fn lock(&self) -> MutexGuard<'_, Option<runner::OrderedShards>> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The shards of `queue` that processor thread `thread` of `threads` fetches now (empty once
    /// stopped).
    fn thread_shards(&self, queue: String, thread: usize, threads: usize) -> Vec<u32> {
        self.lock()
            .as_ref()
            .map(|s| s.thread_shards(&queue, thread, threads))
            .unwrap_or_default()
    }

    /// Every shard of `queue` this process holds now.
    fn owned(&self, queue: String) -> Vec<u32> {
        self.lock()
            .as_ref()
            .map(|s| s.owned(&queue))
            .unwrap_or_default()
    }

    /// `fetcher(queue, shards_count, scheduler, batch_size)`, scheduler `"lag"` or `"seq"`: a
    /// processor thread's fetcher for one queue, with a connection of its own, taking several batches
    /// per fetch when batches run fast (`queue_core::ordered::fetch`, "Prefetch").
    fn fetcher(
        ruby: &Ruby,
        rb_self: &Self,
        queue: String,
        shards_count: u32,
        scheduler: String,
        batch_size: usize,
    ) -> Result<OrderedFetcher, Error> {
        let scheduler = match scheduler.as_str() {
            "lag" => Scheduler::Lag,
            "seq" => Scheduler::Seq,
            other => {
                return Err(arg_error(
                    ruby,
                    format!("unknown ordered scheduler {other:?}; use lag or seq"),
                ))
            }
        };
        let namespace = rb_self.redis.keys().namespace();
        let queue = OrderedQueue::new(namespace, &queue, shards_count).map_err(to_ruby)?;
        let fetcher = CoreFetcher::new(queue, &rb_self.identity, scheduler, batch_size)
            .map_err(to_ruby)?
            .with_prefetch();
        Ok(OrderedFetcher {
            inner: Mutex::new((SyncConn::new(&rb_self.redis), fetcher)),
        })
    }

    /// Ends the beat thread and releases every lease (once the processor threads have settled).
    fn stop(&self) -> Result<(), Error> {
        let Some(shards) = self.lock().take() else {
            return Ok(());
        };
        blocking(move || shards.stop())
    }
}

/// `JobQueue::Native::OrderedFetcher`: one processor thread's fetcher for one ordered queue.
#[magnus::wrap(class = "JobQueue::Native::OrderedFetcher", free_immediately, size)]
pub struct OrderedFetcher {
    inner: Mutex<(SyncConn, CoreFetcher)>,
}

impl OrderedFetcher {
    /// `settle_and_fetch(settle, max_retry_count, shards)`: settles the batch just run and takes the
    /// next from `shards`, in one round trip. `settle` is nil or `[shard, [[id, nil], [id, [error,
    /// retry_in]], ...]]` (nil for success). With no shards it only settles. Returns
    /// `[lost, processed, failed, morgue_ids, batch]`, batch nil or `[shard, [[id, retry_count,
    /// perform_in, [[payload, score], ...]], ...]]`.
    fn settle_and_fetch(
        ruby: &Ruby,
        rb_self: &Self,
        settle: Option<(u32, RArray)>,
        max_retry_count: u32,
        shards: Vec<u32>,
    ) -> Result<RArray, Error> {
        let settle = match settle {
            None => None,
            Some((shard, entries)) => {
                let mut outcomes = Vec::with_capacity(entries.len());
                for entry in entries.into_iter() {
                    let (id, failure): (String, Option<(String, f64)>) =
                        magnus::TryConvert::try_convert(entry)?;
                    let outcome = match failure {
                        None => Outcome::Done,
                        Some((error, retry_in)) => Outcome::Failed { error, retry_in },
                    };
                    outcomes.push((id, outcome));
                }
                Some((shard, outcomes))
            }
        };
        let inner = &rb_self.inner;
        let (settled, batch) = blocking(move || {
            let mut guard = inner.lock().unwrap_or_else(PoisonError::into_inner);
            let (conn, fetcher) = &mut *guard;
            let settled = settle
                .as_ref()
                .map(|(shard, outcomes)| (*shard, outcomes.as_slice()));
            fetcher.settle_and_fetch(conn, settled, max_retry_count, &shards)
        })?;
        reply(ruby, settled, batch)
    }
}

impl OrderedFetcher {
    /// `put_back(shard, ids)`: ids fetched from `shard` that never ran (their thread died holding
    /// them) go back to the queue as they were fetched, neither processed nor failed. Returns false
    /// when the shard changed owner meanwhile: its new owner has recovered them already.
    fn put_back(rb_self: &Self, shard: u32, ids: Vec<String>) -> Result<bool, Error> {
        let outcomes: Vec<(String, Outcome)> =
            ids.into_iter().map(|id| (id, Outcome::PutBack)).collect();
        let inner = &rb_self.inner;
        let (settled, _) = blocking(move || {
            let mut guard = inner.lock().unwrap_or_else(PoisonError::into_inner);
            let (conn, fetcher) = &mut *guard;
            fetcher.settle_and_fetch(conn, Some((shard, outcomes.as_slice())), 0, &[])
        })?;
        Ok(!settled.lost)
    }
}

fn reply(ruby: &Ruby, settled: Settled, batch: Option<Batch>) -> Result<RArray, Error> {
    let out = ruby.ary_new_capa(5);
    out.push(settled.lost)?;
    out.push(settled.processed)?;
    out.push(settled.failed)?;
    out.push(settled.morgue)?;
    match batch {
        None => out.push(ruby.qnil())?,
        Some(batch) => {
            let jobs = ruby.ary_new_capa(batch.jobs.len());
            for job in &batch.jobs {
                jobs.push((
                    job.id.as_str(),
                    job.retry_count,
                    job.perform_in,
                    payloads_to_ruby(ruby, &job.payloads)?,
                ))?;
            }
            out.push((batch.shard, jobs))?;
        }
    }
    Ok(out)
}

pub fn define(ruby: &Ruby, native: &magnus::RModule) -> Result<(), Error> {
    let engine = native.const_get::<_, magnus::RClass>("Engine")?;
    engine.define_method("ordered_push", magnus::method!(Engine::ordered_push, 3))?;
    engine.define_method("ordered_stats", magnus::method!(Engine::ordered_stats, 1))?;
    engine.define_method("ordered_shards", magnus::method!(Engine::ordered_shards, 2))?;
    engine.define_method("ordered_morgue", magnus::method!(Engine::ordered_morgue, 6))?;
    engine.define_method("ordered_admin", magnus::method!(Engine::ordered_admin, 4))?;
    engine.define_method("start_ordered", magnus::method!(Engine::start_ordered, 3))?;

    let shards = native.define_class("OrderedShards", ruby.class_object())?;
    shards.undef_default_alloc_func();
    shards.define_method(
        "thread_shards",
        magnus::method!(OrderedShards::thread_shards, 3),
    )?;
    shards.define_method("owned", magnus::method!(OrderedShards::owned, 1))?;
    shards.define_method("fetcher", magnus::method!(OrderedShards::fetcher, 4))?;
    shards.define_method("stop", magnus::method!(OrderedShards::stop, 0))?;

    let fetcher = native.define_class("OrderedFetcher", ruby.class_object())?;
    fetcher.undef_default_alloc_func();
    fetcher.define_method(
        "settle_and_fetch",
        magnus::method!(OrderedFetcher::settle_and_fetch, 3),
    )?;
    fetcher.define_method("put_back", magnus::method!(OrderedFetcher::put_back, 2))?;
    Ok(())
}
