//! `JobQueue::Native::PushTemplate`: what `perform_async` needs of a worker to build its jobs in the
//! engine — its queue, its options as a JSON prefix, and its deduplication — made once per worker
//! (and again when options change) so a push converts nothing but the arguments.

use std::sync::OnceLock;

use magnus::{prelude::*, Error, RString, Ruby};
use queue_core::dedup::{FlagCheck, OnePush, PushOptions};
use queue_core::keys::Keys;

use super::bytes_of;

#[magnus::wrap(class = "JobQueue::Native::PushTemplate", free_immediately, size)]
pub struct PushTemplate {
    pub queue: String,
    pub prefix: Vec<u8>,
    pub dedup: Option<PushOptions>,
    /// The one-job deduplicated push's fixed bytes, made on the first such push (`None` inside
    /// when this template's pushes do not take that path).
    one: OnceLock<Option<OnePush>>,
}

impl PushTemplate {
    /// `PushTemplate.new(queue, prefix, dedup)`: `prefix` is the worker's options with its class,
    /// as a JSON object without the closing brace; `dedup` nil or `[class, ttl, idempotent,
    /// reschedule]`, as for `Engine#push_dedup`.
    fn new(
        ruby: &Ruby,
        queue: String,
        prefix: RString,
        dedup: Option<(String, u64, bool, bool)>,
    ) -> Result<PushTemplate, Error> {
        let prefix = bytes_of(prefix);
        if prefix.first() != Some(&b'{') || prefix.last() == Some(&b'}') {
            return Err(Error::new(
                ruby.exception_arg_error(),
                "a push template's prefix is a JSON object without its closing brace",
            ));
        }
        let dedup = dedup.map(|(class, ttl, idempotent, reschedule)| PushOptions {
            class,
            ttl,
            idempotent,
            reschedule,
            flag: FlagCheck::Redis,
        });
        Ok(PushTemplate {
            queue,
            prefix,
            dedup,
            one: OnceLock::new(),
        })
    }

    /// The template's [`OnePush`], made on the first call for the namespace of `keys` (the engine
    /// uses it only where it fits the push); `None` when the template has no deduplication or its
    /// pushes do not take that path.
    pub fn one_push(&self, keys: &Keys) -> Option<&OnePush> {
        let opts = self.dedup.as_ref()?;
        self.one
            .get_or_init(|| OnePush::new(keys, &self.queue, opts, &self.prefix))
            .as_ref()
    }

    /// The worker's deduplication for one push, with the queue's flag as the caller read it (`None`:
    /// the script reads it in Redis); `None` for a worker without deduplication.
    pub fn dedup_with(&self, flag: Option<bool>) -> Option<PushOptions> {
        self.dedup.clone().map(|opts| PushOptions {
            flag: flag.map_or(FlagCheck::Redis, FlagCheck::Given),
            ..opts
        })
    }
}

pub fn define(ruby: &Ruby, native: &magnus::RModule) -> Result<(), Error> {
    let class = native.define_class("PushTemplate", ruby.class_object())?;
    class.define_singleton_method("new", magnus::function!(PushTemplate::new, 3))?;
    Ok(())
}
