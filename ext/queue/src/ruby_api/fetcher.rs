//! `JobQueue::Native::Fetcher`: one processor thread's access to work.
//!
//! `next` returns `[queue, job_json]` or nil. When a batch is already in memory it answers without
//! releasing the GVL or touching Redis; otherwise it releases the GVL for the round trip or the wait.
//! `done` writes the acknowledgement to the socket without waiting for a reply (with the GVL held for
//! ordinary jobs: the write is a few microseconds; released for large ones, whose bytes may have to
//! wait for socket space); `fail` files the job under
//! Sidekiq's retry rules (the worker's own `retry` option included) and returns `[fate, job_json]`;
//! `expired` acknowledges a job dropped unrun (its `expires_at` past) as `done` does; `bury` sends
//! unreadable job data to the dead set; `close` writes acks and puts prefetched jobs back.

use std::sync::Mutex;
use std::time::Duration;

use magnus::{prelude::*, Error, Integer, RArray, RHash, RString, Ruby, Symbol, Value};
use queue_core::dedup::Release;
use queue_core::fetch;
use queue_core::limits::{self, Outcome, Rate, RateKind};
use queue_core::retry::{Failure, RetryIn, WorkerRetry};

use super::utf8_string;
use crate::errors::blocking;

mod run;

/// Jobs up to this size are acknowledged with the GVL held: their `LREM` always fits the socket's
/// buffer, so the write cannot block.
const DONE_WITH_GVL_MAX: usize = 16 * 1024;

#[magnus::wrap(class = "JobQueue::Native::Fetcher", free_immediately, size)]
pub struct Fetcher {
    inner: Mutex<fetch::Fetcher>,
    /// Jobs `run` ran itself (`run.rs`), for the processor's malloc check every few.
    ran_here: std::sync::atomic::AtomicU32,
    /// The running job's bytes, copied out of the engine for `run` to read without its locks.
    scratch: Mutex<Vec<u8>>,
}

impl Fetcher {
    pub fn new(inner: fetch::Fetcher) -> Fetcher {
        Fetcher {
            inner: Mutex::new(inner),
            ran_here: std::sync::atomic::AtomicU32::new(0),
            scratch: Mutex::new(Vec::new()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, fetch::Fetcher> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// `next(timeout)`: `[queue, job JSON, key_released]` or nil. `key_released`: the job's
    /// idempotency key went out with its batch, so it needs no `dedup` call.
    fn next(ruby: &Ruby, rb_self: &Self, timeout: f64) -> Result<Option<RArray>, Error> {
        let buffered = rb_self.lock().next_buffered();
        let job = match buffered {
            Some(job) => Some(job),
            None => {
                let wait = Duration::from_secs_f64(timeout.clamp(0.0, 2.0));
                let inner = &rb_self.inner;
                blocking(move || inner.lock().unwrap_or_else(|p| p.into_inner()).next(wait))?
            }
        };
        let Some((queue, raw)) = job else {
            return Ok(None);
        };
        let key_released = rb_self.lock().running_key_released();
        let work = ruby.ary_new_capa(3);
        work.push(ruby.str_new(&queue))?;
        work.push(utf8_string(ruby, &raw))?;
        work.push(key_released)?;
        Ok(Some(work))
    }

    fn done(&self) -> Result<(), Error> {
        self.done_as(None)
    }

    /// `done`, with the class the job counts under in the metrics when the caller read it.
    fn done_as(&self, class: Option<&str>) -> Result<(), Error> {
        if self.lock().running_len() <= DONE_WITH_GVL_MAX {
            self.lock().done_as(class);
            return Ok(());
        }
        let inner = &self.inner;
        let class = class.map(str::to_owned);
        blocking(move || {
            inner
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .done_as(class.as_deref());
            Ok(())
        })
    }

    /// The running job was dropped unrun, its `expires_at` past: acknowledged as `done` does (the
    /// same write, GVL held), logged and counted as expired.
    fn expired(&self) -> Result<(), Error> {
        if self.lock().running_len() <= DONE_WITH_GVL_MAX {
            self.lock().expired();
            return Ok(());
        }
        let inner = &self.inner;
        blocking(move || {
            inner.lock().unwrap_or_else(|p| p.into_inner()).expired();
            Ok(())
        })
    }

    /// `fail(error_class, message, backtrace_lines, retry_in, worker_retry)`; `retry_in` is nil, an
    /// Integer of seconds, or `:kill` / `:discard`; `worker_retry` is the worker class's `retry`
    /// option (true, false or an Integer), or nil when the class is unknown.
    fn fail(
        ruby: &Ruby,
        rb_self: &Self,
        error_class: String,
        message: String,
        backtrace: Vec<String>,
        retry_in: Value,
        worker_retry: Value,
    ) -> Result<RArray, Error> {
        let failure = Failure {
            error_class,
            error_message: message,
            backtrace,
            retry_in: retry_in_of(ruby, retry_in)?,
            worker_retry: worker_retry_of(worker_retry)?,
        };
        let inner = &rb_self.inner;
        let (fate, filed) = blocking(move || {
            inner
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .fail(&failure)
        })?;
        let out = ruby.ary_new_capa(2);
        out.push(ruby.to_symbol(fate.name()))?;
        out.push(filed)?;
        Ok(out)
    }

    /// `dedup(key, jid, until_executed, ttl, reschedule, read)`: the running job carries
    /// `idempotency_key`. Releases it now (`until_executing`: an unreplied write, GVL held) or with the
    /// job's ack or failure (`until_executed`). With `read` (the job has `wal_locations`), one round
    /// trip returns the merged positions as a Hash; otherwise nil.
    #[allow(clippy::too_many_arguments)]
    fn dedup(
        ruby: &Ruby,
        rb_self: &Self,
        key: String,
        jid: String,
        until_executed: bool,
        ttl: u64,
        reschedule: bool,
        read: bool,
    ) -> Result<Option<RHash>, Error> {
        let release = Release {
            key,
            jid,
            ttl,
            reschedule,
        };
        let merged = if read {
            let inner = &rb_self.inner;
            blocking(move || {
                inner
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .dedup(release, until_executed, true)
            })?
        } else {
            rb_self
                .lock()
                .dedup(release, until_executed, false)
                .map_err(crate::errors::to_ruby)?
        };
        let Some(merged) = merged else {
            return Ok(None);
        };
        let hash = ruby.hash_new();
        for (name, position) in merged {
            hash.aset(name, position)?;
        }
        Ok(Some(hash))
    }

    /// `limit(class, jid, concurrency_key, limit, rate_key, kind, count, per)`: checks the running
    /// job's limits before it starts: in memory from the process's leases, or one round trip (GVL
    /// released). `concurrency_key` is nil for no
    /// concurrency limit, `rate_key` nil for no rate limit; each is the worker class or
    /// `Class[key]`. Returns nil (run it), `:deferred`, `:gone`, or the Float time it was scheduled
    /// for.
    #[allow(clippy::too_many_arguments)]
    fn limit(
        ruby: &Ruby,
        rb_self: &Self,
        class: String,
        jid: String,
        concurrency_key: Option<String>,
        limit: u64,
        rate_key: Option<String>,
        kind: String,
        count: u64,
        per: f64,
    ) -> Result<Value, Error> {
        let rate = match rate_key {
            Some(key) => Some(Rate {
                key,
                kind: RateKind::parse(&kind).map_err(crate::errors::to_ruby)?,
                count,
                per,
            }),
            None => None,
        };
        let req = limits::Request {
            class,
            jid,
            concurrency: concurrency_key.map(|k| (k, limit)),
            rate,
        };
        let inner = &rb_self.inner;
        let outcome =
            blocking(move || inner.lock().unwrap_or_else(|p| p.into_inner()).limit(&req))?;
        Ok(match outcome {
            Outcome::Run => ruby.qnil().as_value(),
            Outcome::Deferred => ruby.to_symbol("deferred").as_value(),
            Outcome::Gone => ruby.to_symbol("gone").as_value(),
            Outcome::Scheduled(at) => ruby.float_from_f64(at).as_value(),
        })
    }

    /// `limit_leased(concurrency_key, limit, rate_key)`: true when the running job's limits are
    /// covered by what the process leased (queue_core::limits::lease), taken in memory: it may run,
    /// with no Redis call and the GVL held. False: ask [`Fetcher::limit`]. Keys as for `limit`.
    fn limit_leased(
        &self,
        concurrency_key: Option<RString>,
        limit: u64,
        rate_key: Option<RString>,
    ) -> Result<bool, Error> {
        let Ok(mut fetcher) = self.inner.try_lock() else {
            return Ok(false);
        };
        // SAFETY: the strings are the caller's arguments, alive and unchanged for this call, and
        // no Ruby code runs while they are borrowed.
        let conc = match &concurrency_key {
            Some(s) => Some((unsafe { s.as_str() }?, limit)),
            None => None,
        };
        let rkey = match &rate_key {
            Some(s) => Some(unsafe { s.as_str() }?),
            None => None,
        };
        Ok(fetcher.limit_leased_keys(conc, rkey).is_some())
    }

    fn bury(&self) -> Result<(), Error> {
        let inner = &self.inner;
        blocking(move || inner.lock().unwrap_or_else(|p| p.into_inner()).bury())
    }

    fn close(&self) -> Result<(), Error> {
        let inner = &self.inner;
        blocking(move || inner.lock().unwrap_or_else(|p| p.into_inner()).close())
    }
}

fn retry_in_of(ruby: &Ruby, v: Value) -> Result<RetryIn, Error> {
    if v.is_nil() {
        return Ok(RetryIn::Default);
    }
    if let Ok(sym) = Symbol::try_convert(v) {
        return match sym.name()?.as_ref() {
            "kill" => Ok(RetryIn::Kill),
            "discard" => Ok(RetryIn::Discard),
            other => Err(Error::new(
                ruby.exception_arg_error(),
                format!("sidekiq_retry_in returned :{other}; expected seconds, :kill or :discard"),
            )),
        };
    }
    let seconds = f64::try_convert(v)?;
    Ok(RetryIn::Seconds(seconds as i64))
}

fn worker_retry_of(v: Value) -> Result<Option<WorkerRetry>, Error> {
    if v.is_nil() {
        return Ok(None);
    }
    if let Some(n) = Integer::from_value(v) {
        return Ok(Some(WorkerRetry::Times(n.to_i64()?)));
    }
    Ok(Some(WorkerRetry::Flag(v.to_bool())))
}

pub fn define(ruby: &Ruby, native: &magnus::RModule) -> Result<(), Error> {
    let class = native.define_class("Fetcher", ruby.class_object())?;
    class.undef_default_alloc_func();
    class.define_method("next", magnus::method!(Fetcher::next, 1))?;
    class.define_method("run", magnus::method!(Fetcher::run, 4))?;
    class.define_method("running_job", magnus::method!(Fetcher::running_job, 0))?;
    class.define_method("done", magnus::method!(Fetcher::done, 0))?;
    class.define_method("expired", magnus::method!(Fetcher::expired, 0))?;
    class.define_method("fail", magnus::method!(Fetcher::fail, 5))?;
    class.define_method("bury", magnus::method!(Fetcher::bury, 0))?;
    class.define_method("dedup", magnus::method!(Fetcher::dedup, 6))?;
    class.define_method("limit", magnus::method!(Fetcher::limit, 8))?;
    class.define_method("limit_leased", magnus::method!(Fetcher::limit_leased, 3))?;
    class.define_method("close", magnus::method!(Fetcher::close, 0))?;
    Ok(())
}
