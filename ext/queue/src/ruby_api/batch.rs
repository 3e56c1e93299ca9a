//! Batches (`queue_core::batch`) for Ruby: `Engine#batch_*` methods behind `JobQueue::Batch`
//! (`lib/queue/batch.rb`). Each runs on the calling thread's synchronous connection with the GVL
//! released.

use std::collections::HashMap;

use magnus::{prelude::*, Error, RArray, RString, Ruby};
use queue_core::batch::{push, store};

use super::engine::{with_sync, Engine};
use super::push_template::PushTemplate;
use super::{args_json, bytes_of};
use crate::errors::blocking;

/// `batch_status`'s answer: the batch's hash, its failed jobs' info, its dead jobs' info.
type Status = (
    HashMap<String, String>,
    HashMap<String, String>,
    HashMap<String, String>,
);

/// `batch_open`'s new batch: description, callback queue, callbacks (JSON), events with callbacks,
/// parent bid, expiry seconds.
type NewBatchArg = (String, String, String, Vec<String>, Option<String>, u64);

impl Engine {
    fn batch_run<T: Send>(
        &self,
        op: impl FnOnce(&mut queue_core::link::blocking::SyncConn) -> queue_core::Result<T> + Send,
    ) -> Result<T, Error> {
        let (redis, id) = (&self.redis, self.id);
        blocking(move || with_sync(redis, id, op))
    }

    /// `batch_open(bid, new, hold)`: `new` nil (reopen) or `[description, callback_queue,
    /// callbacks_json, events, parent_bid_or_nil, expires_in]`.
    fn batch_open(&self, bid: String, new: Option<NewBatchArg>, hold: bool) -> Result<bool, Error> {
        let new = new.map(
            |(description, callback_queue, callbacks, events, parent, expires_in)| {
                store::NewBatch {
                    description,
                    callback_queue,
                    callbacks,
                    events,
                    parent,
                    expires_in,
                }
            },
        );
        self.batch_run(move |c| store::open(c, &bid, new.as_ref(), hold))
    }

    fn batch_close(&self, bid: String) -> Result<bool, Error> {
        self.batch_run(move |c| store::close(c, &bid))
    }

    /// `batch_push(bid, queue, jobs)`: jobs (JSON Strings carrying the bid) queued and counted.
    fn batch_push(&self, bid: String, queue: String, jobs: RArray) -> Result<(), Error> {
        let jobs: Vec<Vec<u8>> = jobs
            .into_iter()
            .map(|v| RString::try_convert(v).map(bytes_of))
            .collect::<Result<_, _>>()?;
        self.batch_run(move |c| push::push_sync(c, &bid, &queue, &jobs))
    }

    /// `batch_schedule(bid, [[at, json], …])`.
    fn batch_schedule(&self, bid: String, entries: RArray) -> Result<(), Error> {
        let mut jobs = Vec::with_capacity(entries.len());
        for entry in entries.into_iter() {
            let (at, json): (f64, RString) = magnus::TryConvert::try_convert(entry)?;
            jobs.push((at, bytes_of(json)));
        }
        self.batch_run(move |c| push::schedule_sync(c, &bid, &jobs))
    }

    /// `batch_push_new(bid, template, args_list)`: `Engine#push_bulk_new` for a batch — each job
    /// built here with the batch's bid, queued and counted in one `MULTI`. Returns the jids, or nil
    /// (nothing written) when the worker deduplicates, the bid would need escaping, or an argument
    /// is not one the engine writes: the caller then takes the Ruby path.
    fn batch_push_new(
        ruby: &Ruby,
        rb_self: &Self,
        bid: String,
        template: &PushTemplate,
        args_list: RArray,
    ) -> Result<magnus::Value, Error> {
        let plain = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '_';
        if template.dedup.is_some() || bid.is_empty() || !bid.chars().all(plain) {
            return Ok(ruby.qnil().as_value());
        }
        let Some(args_jsons) = args_json::write_each(ruby, args_list) else {
            return Ok(ruby.qnil().as_value());
        };
        let (queue, prefix) = (template.queue.clone(), template.prefix.clone());
        let jids = rb_self
            .batch_run(move |c| push::push_new_sync(c, &bid, &queue, &prefix, &args_jsons))?;
        let out = ruby.ary_new_capa(jids.len());
        for jid in jids {
            out.push(ruby.str_new(&jid))?;
        }
        Ok(out.as_value())
    }

    fn batch_adjust(&self, bid: String, n: i64) -> Result<(), Error> {
        self.batch_run(move |c| push::adjust_sync(c, &bid, n))
    }

    fn batch_status(&self, bid: String) -> Result<Option<Status>, Error> {
        let stored = self.batch_run(move |c| store::status(c, &bid))?;
        Ok(stored.map(|s| (s.fields, s.failed, s.dead)))
    }

    fn batch_list(&self, offset: i64, count: i64) -> Result<(Vec<(String, f64)>, i64), Error> {
        self.batch_run(move |c| store::list(c, offset, count))
    }

    fn batch_invalidate(&self, bid: String) -> Result<bool, Error> {
        self.batch_run(move |c| store::invalidate(c, &bid))
    }

    fn batch_valid(&self, bid: String) -> Result<bool, Error> {
        self.batch_run(move |c| store::valid(c, &bid))
    }
}

pub fn define(native: &magnus::RModule) -> Result<(), Error> {
    let e = native.const_get::<_, magnus::RClass>("Engine")?;
    e.define_method("batch_open", magnus::method!(Engine::batch_open, 3))?;
    e.define_method("batch_close", magnus::method!(Engine::batch_close, 1))?;
    e.define_method("batch_push", magnus::method!(Engine::batch_push, 3))?;
    e.define_method("batch_schedule", magnus::method!(Engine::batch_schedule, 2))?;
    e.define_method("batch_push_new", magnus::method!(Engine::batch_push_new, 3))?;
    e.define_method("batch_adjust", magnus::method!(Engine::batch_adjust, 2))?;
    e.define_method("batch_status", magnus::method!(Engine::batch_status, 1))?;
    e.define_method("batch_list", magnus::method!(Engine::batch_list, 2))?;
    e.define_method(
        "batch_invalidate",
        magnus::method!(Engine::batch_invalidate, 1),
    )?;
    e.define_method("batch_valid", magnus::method!(Engine::batch_valid, 1))?;
    Ok(())
}
