//! `JobQueue::Native::Engine`: one configured Redis (URL + namespace) and the client side of it.
//!
//! Pushes run with the GVL released on the calling Ruby thread's handle (a thread-local map keyed by
//! engine) on the synchronous connection the process's threads share (`link::combining`): pushes
//! made at the same time from several threads go out in one write; no runtime, no hop to another
//! thread per call. Reads (`stats`)
//! drive the engine's async API on a current-thread runtime of the same thread. A forked child sees
//! the parent's pid on an inherited connection and dials its own (the inherited one is leaked, not
//! closed, since its socket is the parent's too).

use std::cell::RefCell;
use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread::LocalKey;

use magnus::{prelude::*, Error, RArray, RHash, RString, Ruby};
use queue_core::link::blocking::{BlockingConn, SyncConn};
use queue_core::link::sentinel::{SentinelAddr, SentinelConfig};
use queue_core::link::wait_replicas::WaitReplicas;
use queue_core::{api, client, dedup, migrate, shard_move, Redis, RedisConfig};

use super::push_template::PushTemplate;
use super::{args_json, bytes_of};
use crate::errors::blocking;

/// `RedisOptions#engine_sentinel`: the master's name, each sentinel's host and port, and the
/// sentinels' username and password.
type SentinelArg = (String, Vec<(String, u16)>, Option<String>, Option<String>);

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

thread_local! {
    static CONNS: RefCell<HashMap<u64, BlockingConn>> = RefCell::new(HashMap::new());
    static SYNC_CONNS: RefCell<HashMap<u64, SyncConn>> = RefCell::new(HashMap::new());
}

#[magnus::wrap(class = "JobQueue::Native::Engine", free_immediately, size)]
pub struct Engine {
    pub(super) redis: Redis,
    pub(super) id: u64,
}

/// A connection owned by one thread, which remembers the process that dialled it.
trait PerThread: Sized {
    fn pid(&self) -> u32;
}

impl PerThread for BlockingConn {
    fn pid(&self) -> u32 {
        BlockingConn::pid(self)
    }
}

impl PerThread for SyncConn {
    fn pid(&self) -> u32 {
        SyncConn::pid(self)
    }
}

/// Runs `op` on this thread's connection for engine `id`, dialling one first if there is none or if
/// the one there was inherited through fork (that one is leaked: its socket is the parent's).
fn on_thread<C: PerThread, T>(
    conns: &'static LocalKey<RefCell<HashMap<u64, C>>>,
    id: u64,
    dial: impl FnOnce() -> queue_core::Result<C>,
    op: impl FnOnce(&mut C) -> queue_core::Result<T>,
) -> queue_core::Result<T> {
    conns.with(|cell| {
        let mut conns = cell.borrow_mut();
        let pid = queue_core::link::process_id::current();
        // The common case, one look-up: this thread's connection, dialled in this process.
        if let Some(conn) = conns.get_mut(&id).filter(|c| c.pid() == pid) {
            return op(conn);
        }
        // None yet, or one inherited through fork.
        if let Some(inherited) = conns.remove(&id) {
            std::mem::forget(inherited);
        }
        let conn = match conns.entry(id) {
            Entry::Occupied(e) => e.into_mut(),
            Entry::Vacant(e) => e.insert(dial()?),
        };
        op(conn)
    })
}

/// Runs an async engine operation on this thread's runtime-driven connection.
pub(super) fn with_conn<T>(
    redis: &Redis,
    id: u64,
    op: impl AsyncFnOnce(&mut queue_core::link::connection::Conn) -> queue_core::Result<T>,
) -> queue_core::Result<T> {
    on_thread(&CONNS, id, || BlockingConn::new(redis), |c| c.run(op))
}

/// Runs `op` on this thread's handle on the shared synchronous connection (`link::combining`).
pub(super) fn with_sync<T>(
    redis: &Redis,
    id: u64,
    op: impl FnOnce(&mut SyncConn) -> queue_core::Result<T>,
) -> queue_core::Result<T> {
    on_thread(&SYNC_CONNS, id, || Ok(SyncConn::combined(redis)), op)
}

/// `{"queued" =>, "scheduled" =>, "retry" =>, "keys" =>}`.
fn migrated_hash(ruby: &Ruby, moved: migrate::Migrated) -> Result<RHash, Error> {
    let hash = ruby.hash_new();
    hash.aset("queued", moved.queued)?;
    hash.aset("scheduled", moved.scheduled)?;
    hash.aset("retry", moved.retry)?;
    hash.aset("keys", moved.keys)?;
    Ok(hash)
}

impl Engine {
    /// `Engine.new(url, namespace, ca_file, busy_poll_us, sentinel)`: `ca_file` (a PEM path or nil)
    /// is the CA to trust for `rediss://` instead of the system's; `busy_poll_us` how long this
    /// thread's client calls poll for their reply before sleeping (0: never); `sentinel` nil, or
    /// `[master_name, [[host, port], ...], username, password]` to find the master through Redis
    /// Sentinel before every dial (`RedisOptions#engine_sentinel`); `wait` nil, or `[replicas,
    /// timeout_ms]` for every push to wait for that many replicas (`RedisOptions#engine_wait`).
    fn new(
        url: String,
        namespace: String,
        ca_file: Option<String>,
        busy_poll_us: u64,
        sentinel: Option<SentinelArg>,
        wait: Option<(u32, u64)>,
    ) -> Result<Engine, Error> {
        let mut config = RedisConfig::new(&url, &namespace)
            .with_busy_poll(std::time::Duration::from_micros(busy_poll_us));
        if let Some(path) = ca_file {
            config = config.with_ca_file(path);
        }
        if let Some((name, sentinels, username, password)) = sentinel {
            let addrs = sentinels
                .into_iter()
                .map(|(host, port)| SentinelAddr { host, port })
                .collect();
            config = config.with_sentinel(
                SentinelConfig::new(&name, addrs)
                    .with_username(username)
                    .with_password(password),
            );
        }
        if let Some((replicas, timeout_ms)) = wait {
            let wait = WaitReplicas::new(replicas, std::time::Duration::from_millis(timeout_ms))
                .map_err(crate::errors::to_ruby)?;
            config = config.with_wait_replicas(wait);
        }
        let redis = Redis::new(config).map_err(crate::errors::to_ruby)?;
        Ok(Engine {
            redis,
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
        })
    }

    fn namespace(&self) -> String {
        self.redis.keys().namespace().to_owned()
    }

    /// `push(queue, [json, ...])`: LPUSH onto `queue:<queue>`, in order.
    fn push(&self, queue: String, jobs: RArray) -> Result<(), Error> {
        let jobs: Vec<Vec<u8>> = jobs
            .into_iter()
            .map(|v| RString::try_convert(v).map(bytes_of))
            .collect::<Result<_, _>>()?;
        let (redis, id) = (&self.redis, self.id);
        blocking(move || with_sync(redis, id, |c| client::push_sync(c, &queue, &jobs)))
    }

    /// `push_new(template, args, flag)`: `perform_async`'s common case in one call — the job built
    /// here from the worker's template and its arguments, and queued (deduplicated when the template
    /// says so; `flag` as for `push_dedup`). Returns the jid, `false` when the job was dropped as a
    /// duplicate, or nil when an argument is not one the engine writes itself (the caller then takes
    /// its general path).
    fn push_new(
        ruby: &Ruby,
        rb_self: &Self,
        template: &PushTemplate,
        args: RArray,
        flag: Option<bool>,
    ) -> Result<magnus::Value, Error> {
        let Some(args_json) = args_json::write(ruby, args) else {
            return Ok(ruby.qnil().as_value());
        };
        let pushed = rb_self.push_from_template(template, flag, |c, queue, prefix, dedup| {
            // The fixed bytes kept by the template serve the flag read in Redis (no `flag`).
            let one = flag
                .is_none()
                .then(|| template.one_push(c.keys()))
                .flatten();
            client::push_new_with(c, queue, prefix, &args_json, dedup, one)
        })?;
        Ok(match pushed {
            client::Pushed::Queued(jid) => ruby.str_new(&jid).as_value(),
            client::Pushed::Dropped => ruby.qfalse().as_value(),
        })
    }

    /// `push_bulk_new(template, args_list, flag)`: `perform_bulk`'s common case — every job built
    /// here from the worker's template and its arguments, all queued in one round trip
    /// (deduplicated when the template says so; `flag` as for `push_dedup`). Returns the jids of the
    /// jobs queued (dropped duplicates left out), or nil, before anything is written, when an entry
    /// is not an Array or holds an argument the engine does not write itself.
    fn push_bulk_new(
        ruby: &Ruby,
        rb_self: &Self,
        template: &PushTemplate,
        args_list: RArray,
        flag: Option<bool>,
    ) -> Result<magnus::Value, Error> {
        let Some(args_jsons) = args_json::write_each(ruby, args_list) else {
            return Ok(ruby.qnil().as_value());
        };
        let jids = rb_self.push_from_template(template, flag, |c, queue, prefix, dedup| {
            client::push_bulk_new_sync(c, queue, prefix, &args_jsons, dedup)
        })?;
        let out = ruby.ary_new_capa(jids.len());
        for jid in jids {
            out.push(ruby.str_new(&jid))?;
        }
        Ok(out.as_value())
    }

    /// Runs an engine-built push (`push_new`, `push_bulk_new`) on this thread's connection with the
    /// GVL released, handing it the template's queue and prefix and its deduplication for this push
    /// (`flag` as for `push_dedup`).
    fn push_from_template<T: Send>(
        &self,
        template: &PushTemplate,
        flag: Option<bool>,
        push: impl FnOnce(&mut SyncConn, &str, &[u8], Option<&dedup::PushOptions>) -> queue_core::Result<T>
            + Send,
    ) -> Result<T, Error> {
        // The template's own options when the script reads the flag (the common case): no copy.
        let given = flag.and_then(|_| template.dedup_with(flag));
        let dedup = given.as_ref().or(template.dedup.as_ref());
        let (queue, prefix) = (template.queue.as_str(), template.prefix.as_slice());
        let (redis, id) = (&self.redis, self.id);
        blocking(move || with_sync(redis, id, |c| push(c, queue, prefix, dedup)))
    }

    /// `schedule([[at, json], ...])`: ZADD to `schedule`.
    fn schedule(&self, entries: RArray) -> Result<(), Error> {
        let mut jobs = Vec::with_capacity(entries.len());
        for entry in entries.into_iter() {
            let (at, json): (f64, RString) = magnus::TryConvert::try_convert(entry)?;
            jobs.push((at, bytes_of(json)));
        }
        let (redis, id) = (&self.redis, self.id);
        blocking(move || with_sync(redis, id, |c| client::schedule_sync(c, &jobs)))
    }

    /// `push_dedup(queue, [[jid, json, args_json, at_or_nil], ...], [class, ttl, idempotent,
    /// reschedule], flag)`: pushes with GitLab-style deduplication, one round trip. `flag` is nil
    /// (read the queue's flag in Redis) or whether dropping is off. Returns one entry per job: nil (pushed),
    /// `[:marked, jid]` or `[:dropped, jid]` (the holder's jid).
    fn push_dedup(
        ruby: &Ruby,
        rb_self: &Self,
        queue: String,
        entries: RArray,
        opts: (String, u64, bool, bool),
        flag: Option<bool>,
    ) -> Result<RArray, Error> {
        let mut jobs = Vec::with_capacity(entries.len());
        for entry in entries.into_iter() {
            let (jid, json, args, at): (String, RString, RString, Option<f64>) =
                magnus::TryConvert::try_convert(entry)?;
            jobs.push(dedup::DedupJob {
                jid,
                json: bytes_of(json),
                args: bytes_of(args),
                at,
            });
        }
        let (class, ttl, idempotent, reschedule) = opts;
        let opts = dedup::PushOptions {
            class,
            ttl,
            idempotent,
            reschedule,
            flag: flag.map_or(dedup::FlagCheck::Redis, dedup::FlagCheck::Given),
        };
        let (redis, id) = (&rb_self.redis, rb_self.id);
        let outcomes =
            blocking(move || with_sync(redis, id, |c| dedup::push_sync(c, &queue, &opts, &jobs)))?;
        let out = ruby.ary_new_capa(outcomes.len());
        for outcome in outcomes {
            match outcome {
                dedup::Outcome::Pushed => out.push(ruby.qnil())?,
                dedup::Outcome::Marked(jid) => out.push((ruby.to_symbol("marked"), jid))?,
                dedup::Outcome::Dropped(jid) => out.push((ruby.to_symbol("dropped"), jid))?,
            }
        }
        Ok(out)
    }

    /// `set_feature(name, on)`: sets or clears a flag in `jq:features`.
    fn set_feature(&self, name: String, on: bool) -> Result<(), Error> {
        let (redis, id) = (&self.redis, self.id);
        blocking(move || {
            with_sync(redis, id, |c| {
                c.cmd::<i64>(&dedup::set_flag_cmd(c.keys(), &name, on))
                    .map(|_| ())
            })
        })
    }

    /// `features`: every flag set in `jq:features`, as a Hash of name => value.
    fn features(&self) -> Result<HashMap<String, String>, Error> {
        let (redis, id) = (&self.redis, self.id);
        blocking(move || with_sync(redis, id, |c| c.cmd(&dedup::flags_cmd(c.keys()))))
    }

    /// Totals as a Hash (`processed`, `failed`, sizes, `queues` => {name => size}).
    fn stats(ruby: &Ruby, rb_self: &Self) -> Result<RHash, Error> {
        let (redis, id) = (&rb_self.redis, rb_self.id);
        let stats = blocking(move || with_conn(redis, id, async |c| api::stats(c).await))?;
        let hash = ruby.hash_new();
        hash.aset("processed", stats.processed)?;
        hash.aset("failed", stats.failed)?;
        hash.aset("scheduled_size", stats.scheduled_size)?;
        hash.aset("retry_size", stats.retry_size)?;
        hash.aset("dead_size", stats.dead_size)?;
        hash.aset("processes_size", stats.processes_size)?;
        hash.aset("workers_size", stats.workers_size)?;
        hash.aset("expired", stats.expired)?;
        hash.aset("enqueued", stats.enqueued)?;
        hash.aset("default_queue_latency", stats.default_queue_latency)?;
        let queues = ruby.hash_new();
        for (name, size) in stats.queues {
            queues.aset(name, size)?;
        }
        hash.aset("queues", queues)?;
        Ok(hash)
    }

    fn queue_size(&self, queue: String) -> Result<i64, Error> {
        let (redis, id) = (&self.redis, self.id);
        blocking(move || with_conn(redis, id, async |c| api::queue_size(c, &queue).await))
    }

    // ---- queue renames (migrate.rs) ----------------------------------------------------------

    /// `migrate_queue(from, to)`: moves queue `from`'s queued, scheduled and retrying jobs and its
    /// deduplication keys to `to`, one job per atomic step. Returns
    /// `{"queued" =>, "scheduled" =>, "retry" =>, "keys" =>}`.
    /// `move_queue_to(other, queue)`: moves queue `queue`'s queued, scheduled and retrying jobs and
    /// its deduplication keys from this engine's Redis to `other`'s (another shard), batch by batch
    /// (`shard_move/`). Returns the same Hash as `migrate_queue`.
    fn move_queue_to(
        ruby: &Ruby,
        rb_self: &Self,
        other: &Engine,
        queue: String,
    ) -> Result<RHash, Error> {
        if rb_self.redis.keys() != other.redis.keys() {
            return Err(Error::new(
                ruby.exception_arg_error(),
                "the shards use different namespaces; a queue moves between shards of one namespace",
            ));
        }
        let (redis, id) = (&rb_self.redis, rb_self.id);
        let target = other.redis.clone();
        let moved = blocking(move || {
            with_conn(redis, id, async |c| {
                let mut to = target.conn();
                shard_move::move_queue(c, &mut to, &queue).await
            })
        })?;
        migrated_hash(ruby, moved)
    }

    fn migrate_queue(
        ruby: &Ruby,
        rb_self: &Self,
        from: String,
        to: String,
    ) -> Result<RHash, Error> {
        let (redis, id) = (&rb_self.redis, rb_self.id);
        let moved = blocking(move || {
            with_conn(redis, id, async |c| {
                migrate::migrate_queue(c, &from, &to).await
            })
        })?;
        migrated_hash(ruby, moved)
    }

    /// `poll_counts`: what the process's shared client connection's polling for replies has done so far
    /// (`link::busy_poll`), `{"hits" =>, "misses" =>, "skipped" =>}`; nil when it does not poll
    /// (turned off, not plain TCP, not dialled yet).
    fn poll_counts(ruby: &Ruby, rb_self: &Self) -> Result<Option<RHash>, Error> {
        let (redis, id) = (&rb_self.redis, rb_self.id);
        let Some(counts) =
            with_sync(redis, id, |c| Ok(c.poll_counts())).map_err(crate::errors::to_ruby)?
        else {
            return Ok(None);
        };
        let hash = ruby.hash_new();
        hash.aset("hits", counts.hits)?;
        hash.aset("misses", counts.misses)?;
        hash.aset("skipped", counts.skipped)?;
        Ok(Some(hash))
    }

    /// Round trip to Redis; raises `JobQueue::ConnectionError` if it cannot be reached.
    fn ping(&self) -> Result<bool, Error> {
        let (redis, id) = (&self.redis, self.id);
        blocking(move || {
            with_sync(redis, id, |c| {
                c.cmd::<String>(&api::ping_cmd()).map(|_| true)
            })
        })
    }
}

pub fn define(ruby: &Ruby, native: &magnus::RModule) -> Result<(), Error> {
    let class = native.define_class("Engine", ruby.class_object())?;
    class.define_singleton_method("new", magnus::function!(Engine::new, 6))?;
    class.define_method("namespace", magnus::method!(Engine::namespace, 0))?;
    class.define_method("poll_counts", magnus::method!(Engine::poll_counts, 0))?;
    class.define_method("push", magnus::method!(Engine::push, 2))?;
    class.define_method("push_new", magnus::method!(Engine::push_new, 3))?;
    class.define_method("push_bulk_new", magnus::method!(Engine::push_bulk_new, 3))?;
    class.define_method("schedule", magnus::method!(Engine::schedule, 1))?;
    class.define_method("push_dedup", magnus::method!(Engine::push_dedup, 4))?;
    class.define_method("set_feature", magnus::method!(Engine::set_feature, 2))?;
    class.define_method("features", magnus::method!(Engine::features, 0))?;
    class.define_method("stats", magnus::method!(Engine::stats, 0))?;
    class.define_method("queue_size", magnus::method!(Engine::queue_size, 1))?;
    class.define_method("ping", magnus::method!(Engine::ping, 0))?;
    class.define_method("migrate_queue", magnus::method!(Engine::migrate_queue, 2))?;
    class.define_method("move_queue_to", magnus::method!(Engine::move_queue_to, 2))?;
    Ok(())
}
