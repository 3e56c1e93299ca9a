//! `Fetcher#run`: a processor thread's loop over its jobs, with the common job run by the binding
//! itself rather than by `Processor#process` in Ruby.
//!
//! Most jobs a server runs ask nothing of the processor's Ruby code: no server middleware, job log
//! lines written by the engine, no worker context, deduplication, expiry, limits or batch. For such
//! a job `run` builds the job Hash from its JSON (`job_hash.rs`, as `JSON.parse` builds it), makes
//! the worker, gives it its `jid` (and the processor, for workers that take `_context=`), sets the
//! job as the thread's log context (`Logging.with_job`), calls `perform(*args)`, and acknowledges
//! the job — per job a handful of C calls, where Ruby spent ~9 µs on the same steps. Every other job,
//! and every job of a class the processor does not clear (`Processor#native_class`), goes back to
//! Ruby unchanged, with its Hash when one was built. An exception out of `perform` (or `new`, or
//! `jid=`) goes back to Ruby too, which files it as `process` does.
//!
//! Returns nil (no job within the wait, or the process is quiet), true (jobs ran here and the
//! buffer is empty, or `limit` jobs ran), `[queue, json, key_released, job]` for Ruby to process
//! (`job` nil when no Hash was built), or `[:failed, klass, job, json, error]` for Ruby to file.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use std::os::raw::c_int;

use magnus::rb_sys::{AsRawId, AsRawValue, FromRawValue};
use magnus::typed_data::Obj;
use magnus::value::IntoId;
use magnus::value::{LazyId, ReprValue};
use magnus::{Error, RArray, RHash, RString, Ruby, Value};
use queue_core::dedup::Release;
use queue_core::fetch::Unit;
use queue_core::job_outline::Outline;
use rb_sys::{ID, VALUE};

use super::Fetcher;
use crate::errors::blocking;
use crate::ruby_api::job_hash::{self, Args, Top};
use crate::ruby_api::utf8_string;

static PERFORM: LazyId = LazyId::new("perform");
static NEW: LazyId = LazyId::new("new");
static JID_SET: LazyId = LazyId::new("jid=");
static CONTEXT_SET: LazyId = LazyId::new("_context=");
static NATIVE_CLASS: LazyId = LazyId::new("native_class");
static MALLOC_CHECK: LazyId = LazyId::new("malloc_check");
/// `JobQueue::MallocGc::CHECK_EVERY`: the processor looks at malloc's growth after this many jobs.
const MALLOC_CHECK_EVERY: u32 = 8;
/// `JobQueue::Logging::CONTEXT`: the running job, for the log lines it writes.
static LOG_CONTEXT: LazyId = LazyId::new("job_queue_log_job");
/// `JobQueue::Batch::RUNNING`: the bid of the running job's batch, for `batch.jobs { }` in it.
static BATCH_RUNNING: LazyId = LazyId::new("jq_batch_running_bid");
static BID_SET: LazyId = LazyId::new("bid=");
static JID_IVAR: LazyId = LazyId::new("@jid");
static CONTEXT_IVAR: LazyId = LazyId::new("@_context");
static BID_IVAR: LazyId = LazyId::new("@bid");
/// `Processor::ClassInfo.setter`'s answer for `JobQueue::Worker`'s own accessors.
static IVAR: LazyId = LazyId::new("ivar");
/// `JobQueue::Context::THREAD_KEY`: the worker context, which a job without `meta.*` fields runs
/// without.
static WORKER_CONTEXT: LazyId = LazyId::new("job_queue_context");

/// What became of one job.
enum Turn {
    /// Ran and acknowledged.
    Ran,
    /// For Ruby: the value `run` returns.
    Ruby(Value),
}

/// How a worker takes its `jid`, `_context` or `bid` (`Processor::ClassInfo.setter`).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Setter {
    None,
    /// Through its setter method.
    Call,
    /// `JobQueue::Worker`'s own accessor: its instance variable is set directly, as the accessor
    /// sets it, without the method call.
    Ivar,
}

impl Setter {
    /// Gives `worker` the value: `ids` are the setter's method and its instance variable.
    ///
    /// # Safety
    /// With the GVL, under `rb_protect` (the setter may raise); the values held by the caller.
    unsafe fn set(self, worker: VALUE, (method, ivar): (ID, ID), value: VALUE) {
        match self {
            Setter::Ivar => {
                rb_sys::rb_ivar_set(worker, ivar, value);
            }
            Setter::Call => {
                rb_sys::rb_funcallv(worker, method, 1, &value);
            }
            Setter::None => {}
        }
    }

    /// From the answer's `false`, `true` or `:ivar` (read for every job: a comparison of VALUEs).
    fn of(ruby: &Ruby, answer: Value) -> Setter {
        // SAFETY: the Symbol of a static ID; no allocation.
        let ivar = unsafe { rb_sys::rb_id2sym((*IVAR).into_id_with(ruby).as_raw()) };
        if answer.as_raw() == ivar {
            Setter::Ivar
        } else if answer.to_bool() {
            Setter::Call
        } else {
            Setter::None
        }
    }
}

/// A job class cleared to run here, as `Processor#native_class` answers: `[klass, takes_jid,
/// takes_context, takes_bid, limits, dedup, plain_new]`.
#[derive(Clone, Copy)]
struct Class {
    klass: Value,
    jid: Setter,
    context: Setter,
    bid: Setter,
    /// How its jobs release their idempotency key (`deduplication_server_options`):
    /// `[until_executed, ttl, reschedule]`.
    dedup: (bool, u64, bool),
    /// Its limits when it has any: `[concurrency key or nil, limit, rate key or nil]` (unkeyed,
    /// constant: `Limits.leasable`). A job runs here only when the process's leases cover them.
    limits: Option<RArray>,
    /// Its `new` only allocates (`ClassInfo.plain_new?`): a worker is allocated, not made by calls.
    plain_new: bool,
}

impl Fetcher {
    /// `run(timeout, limit, classes, processor)`: runs jobs until the buffer is empty or `limit` of
    /// them ran, waiting up to `timeout` seconds for the first. `classes` is the processor's cache of
    /// `native_class` answers (class name => answer), or nil when every job must go to Ruby (server
    /// middleware, job lines written in Ruby).
    pub(super) fn run(
        ruby: &Ruby,
        rb_self: Obj<Self>,
        timeout: f64,
        limit: usize,
        classes: Option<RHash>,
        processor: Value,
    ) -> Result<Value, Error> {
        let mut ran = 0;
        // The last class cleared here, by name: a buffer's jobs are mostly of one class. Kept for
        // this call only, on its frame (where the collector's scan of the stack finds its VALUEs;
        // the processor's cache holds them too), so a class that declares limits later is asked
        // again by the next call, as `classes` is.
        let mut last = LastClass::default();
        loop {
            let started = if ran == 0 {
                rb_self.start_waiting(timeout)?
            } else {
                rb_self.lock().start_buffered()
            };
            if !started {
                return Ok(if ran == 0 {
                    ruby.qnil().as_value()
                } else {
                    ruby.qtrue().as_value()
                });
            }
            match rb_self.turn(ruby, classes, processor, &mut last, rb_self.as_value())? {
                Turn::Ran => ran += 1,
                Turn::Ruby(work) => return Ok(work),
            }
            if ran >= limit {
                return Ok(ruby.qtrue().as_value());
            }
        }
    }

    /// Starts the next job: from the buffer, or waiting for one with the GVL released.
    fn start_waiting(&self, timeout: f64) -> Result<bool, Error> {
        if self.lock().start_buffered() {
            return Ok(true);
        }
        let wait = Duration::from_secs_f64(timeout.clamp(0.0, 2.0));
        let inner = &self.inner;
        blocking(move || {
            inner
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .start_next(wait)
        })
    }

    /// The started job: run here, or handed to Ruby. `fetcher` is this fetcher's Ruby object: a job
    /// run here from its [`job_hash::Lean`] reading has it as its log context, which builds the
    /// job's Hash only when a line asks for it (`Fetcher#running_job`).
    fn turn(
        &self,
        ruby: &Ruby,
        classes: Option<RHash>,
        processor: Value,
        last: &mut LastClass,
        fetcher: Value,
    ) -> Result<Turn, Error> {
        let mut raw = self.scratch.lock().unwrap_or_else(|p| p.into_inner());
        let Some((queue, key_released, outline)) = self.copy_running(&mut raw) else {
            return Ok(Turn::Ruby(ruby.qnil().as_value()));
        };
        let lean_classes = classes.filter(|_| !last.lean_missed);
        if let (Some(classes), Some(outline)) = (lean_classes, outline) {
            match self.runs_lean(ruby, classes, &raw, &outline, key_released, processor, last) {
                Some((class, top, args)) => {
                    drop(raw);
                    let failed =
                        self.run_here(ruby, &class, None, fetcher, &top, args, processor)?;
                    let counted = (!top.marks.wrapped).then_some(last.text.as_deref());
                    return self.ran(failed, processor, counted.flatten());
                }
                // Not for this path: the rest of the call's jobs build their Hash at once.
                None => last.lean_missed = true,
            }
        }
        let built = classes.and_then(|_| job_hash::build(ruby, &raw));
        let Some((job, top)) = built else {
            return to_ruby(ruby, &queue, &raw, key_released, None).map(Turn::Ruby);
        };
        let class = match classes {
            Some(classes) if runs_here(&top, key_released) => {
                RString::from_value(top.class).and_then(|name| {
                    // SAFETY: the job's class String, read before any Ruby code runs (`class_of`
                    // copies it before it runs any).
                    last.class_of(ruby, classes, unsafe { name.as_slice() }, processor)
                })
            }
            _ => None,
        };
        let runs = match (&class, RArray::from_value(top.args)) {
            (Some(class), Some(args)) => match class.limits {
                None => Some(args),
                Some(_) => last.leased(&mut self.lock()).then_some(args),
            },
            _ => None,
        };
        let (Some(class), Some(args)) = (class, runs) else {
            return to_ruby(ruby, &queue, &raw, key_released, Some(job)).map(Turn::Ruby);
        };
        drop(raw);
        let failed = self.run_here(
            ruby,
            &class,
            Some(job),
            job,
            &top,
            Args::Array(args),
            processor,
        )?;
        let class = counted_class(&top);
        // SAFETY: the String is held by the job Hash on this thread's stack, and the borrow ends
        // before any Ruby code runs again (`done_as` calls none).
        let name = class.as_ref().and_then(|c| unsafe { c.as_str() }.ok());
        self.ran(failed, processor, name)
    }

    /// The class, `Top` and arguments of a job that runs here from its [`job_hash::Lean`]
    /// reading, or `None` when it does not (it then takes the path that builds its Hash first).
    #[allow(clippy::too_many_arguments)]
    fn runs_lean(
        &self,
        ruby: &Ruby,
        classes: RHash,
        raw: &[u8],
        outline: &Outline,
        key_released: bool,
        processor: Value,
        last: &mut LastClass,
    ) -> Option<(Class, Top, Args)> {
        let lean = job_hash::lean(ruby, raw, outline)?;
        let name = lean.class_name(raw)?;
        if !runs_here(&lean.top, key_released) {
            return None;
        }
        let class = last.class_of(ruby, classes, name, processor)?;
        let args = lean.args?;
        if class.limits.is_some() && !last.leased(&mut self.lock()) {
            return None;
        }
        Some((class, lean.top, args))
    }

    /// Runs the job here (`perform` below); `None` when it ran, or `[:failed, klass, job, json,
    /// error]` for Ruby to file when it raised (`job` the Hash, built now from the running job's
    /// JSON where it was not built before). `context` is the job's log context.
    #[allow(clippy::too_many_arguments)]
    fn run_here(
        &self,
        ruby: &Ruby,
        class: &Class,
        job: Option<Value>,
        context: Value,
        top: &Top,
        args: Args,
        processor: Value,
    ) -> Result<Option<Value>, Error> {
        let error = match self.perform(ruby, class, context, top, args, processor) {
            Ok(()) => return Ok(None),
            Err(error) => error,
        };
        match error.value() {
            Some(exception) if exception.is_kind_of(ruby.exception_exception()) => {
                let mut bytes = self.scratch.lock().unwrap_or_else(|p| p.into_inner());
                self.copy_running(&mut bytes);
                let raw = utf8_string(ruby, &bytes);
                let job = job.or_else(|| job_hash::build(ruby, &bytes).map(|(hash, _)| hash));
                drop(bytes);
                let failed = ruby.ary_new_capa(5);
                failed.push(ruby.to_symbol("failed"))?;
                failed.push(class.klass)?;
                failed.push(job)?;
                failed.push(raw)?;
                failed.push(exception)?;
                Ok(Some(failed.as_value()))
            }
            // A jump (the thread killed, a throw without its catch): on its way up.
            _ => Err(error),
        }
    }

    /// After a job ran here: acknowledged and counted under `class` (or as the engine reads it),
    /// and the processor's malloc check every few jobs; or its failure handed to Ruby.
    fn ran(
        &self,
        failed: Option<Value>,
        processor: Value,
        class: Option<&str>,
    ) -> Result<Turn, Error> {
        if let Some(failed) = failed {
            return Ok(Turn::Ruby(failed));
        }
        self.done_as(class)?;
        let ran = self.ran_here.fetch_add(1, Ordering::Relaxed) + 1;
        if ran % MALLOC_CHECK_EVERY == 0 {
            let _: Value = processor.funcall(*MALLOC_CHECK, ())?;
        }
        Ok(Turn::Ran)
    }

    /// `running_job`: the running job's Hash, built from its JSON, for the log context of a job
    /// `run` runs without building it (`Logging`); nil when no job runs or the reader declines the
    /// JSON (which it does not for a job run so).
    pub(super) fn running_job(ruby: &Ruby, rb_self: &Self) -> Option<Value> {
        let mut raw = Vec::new();
        rb_self.copy_running(&mut raw)?;
        job_hash::build(ruby, &raw).map(|(hash, _)| hash)
    }

    /// Copies the running job's bytes into `raw` and returns its queue, whether its key went out
    /// with its batch, and its outline. The engine's locks are held only for the copy: no Ruby
    /// object is made under them (a garbage collection then could free another fetcher, whose drop
    /// takes locks).
    fn copy_running(&self, raw: &mut Vec<u8>) -> Option<(Arc<str>, bool, Option<Outline>)> {
        let fetcher = self.lock();
        let key_released = fetcher.running_key_released();
        fetcher.with_running(|unit: &Unit| {
            raw.clear();
            raw.extend_from_slice(&unit.raw);
            (unit.queue.clone(), key_released, unit.outline.clone())
        })
    }
}

/// `[queue, json, key_released, job]` of the running job, for `Processor#process`.
fn to_ruby(
    ruby: &Ruby,
    queue: &str,
    raw: &[u8],
    key_released: bool,
    job: Option<Value>,
) -> Result<Value, Error> {
    let work = ruby.ary_new_capa(4);
    work.push(ruby.str_new(queue))?;
    work.push(utf8_string(ruby, raw))?;
    work.push(key_released)?;
    work.push(job)?;
    Ok(work.as_value())
}

/// Whether nothing in the job asks for `Processor#process`: a worker context to restore, an
/// expiry, positions to read for its key (`wal_locations`). A key to release is released here when
/// it and the jid are Strings; a batch's job runs here when its bid is a String (`Batch::Runner`'s
/// steps are `perform`'s below).
fn runs_here(top: &Top, key_released: bool) -> bool {
    let dedup = holds_key(top, key_released);
    let dedup_here = !dedup
        || (!top.marks.wal_locations
            && RString::from_value(top.key).is_some()
            && RString::from_value(top.jid).is_some());
    let bid = top.bid.is_nil() || RString::from_value(top.bid).is_some();
    !(top.marks.meta || top.marks.expires_at) && dedup_here && bid
}

/// The `class` String the metrics count the job under, when the Hash shows it plainly (a job with
/// `wrapped` counts under that: left to the engine's own reading of the JSON).
fn counted_class(top: &Top) -> Option<RString> {
    if top.marks.wrapped {
        return None;
    }
    RString::from_value(top.class)
}

/// Whether the job holds its idempotency key and must release it (`Processor#deduplicated`'s
/// condition): it has one, it did not go out with its batch, and the job is no marked duplicate.
fn holds_key(top: &Top, key_released: bool) -> bool {
    top.idempotency_key && !key_released && !top.marks.duplicate_of
}

/// The class the last job of a `run` call was cleared as, with its name's bytes; and whether a job
/// of the call missed the path that runs it without building its Hash.
#[derive(Default)]
struct LastClass {
    name: Vec<u8>,
    /// `name` as text when it is UTF-8 (what the metrics count the job under), checked once.
    text: Option<String>,
    class: Option<Class>,
    /// The class's limits, when it has any and they read as [`LeasedLimits`].
    limits: Option<LeasedLimits>,
    lean_missed: bool,
}

impl LastClass {
    /// The class named `name`, when the processor clears it to run here: the last one again when
    /// the name is the same, else looked up. `name` is read before any Ruby code runs.
    fn class_of(
        &mut self,
        ruby: &Ruby,
        classes: RHash,
        name: &[u8],
        processor: Value,
    ) -> Option<Class> {
        if let Some(class) = self.class.filter(|_| self.name == name) {
            return Some(class);
        }
        let name = name.to_vec();
        let class = class_of(ruby, classes, utf8_string(ruby, &name), processor)?;
        self.text = std::str::from_utf8(&name).ok().map(str::to_owned);
        self.limits = class.limits.and_then(LeasedLimits::read);
        self.name = name;
        self.class = Some(class);
        Some(class)
    }

    /// Whether the running job's limits (its class, the last one cleared, has some) are covered
    /// by the process's leases ([`LeasedLimits::leased`]).
    fn leased(&self, fetcher: &mut queue_core::fetch::Fetcher) -> bool {
        self.limits.as_ref().is_some_and(|l| l.leased(fetcher))
    }
}

/// The class `name`, when the processor clears it to run here (asked once per class and thread).
fn class_of(ruby: &Ruby, classes: RHash, name: RString, processor: Value) -> Option<Class> {
    let answer = match classes.get(name) {
        Some(answer) => answer,
        // An error (an unknown class) is Ruby's to report, as the job's failure.
        None => processor.funcall(*NATIVE_CLASS, (name,)).ok()?,
    };
    let answer = RArray::from_value(answer)?;
    Some(Class {
        klass: answer.entry(0).ok()?,
        jid: Setter::of(ruby, answer.entry(1).ok()?),
        context: Setter::of(ruby, answer.entry(2).ok()?),
        bid: Setter::of(ruby, answer.entry(3).ok()?),
        limits: RArray::from_value(answer.entry(4).ok()?),
        dedup: {
            let options: RArray = answer.entry(5).ok()?;
            (
                options.entry::<Value>(0).ok()?.to_bool(),
                options.entry(1).ok()?,
                options.entry::<Value>(2).ok()?.to_bool(),
            )
        },
        plain_new: answer.entry::<Value>(6).ok()?.to_bool(),
    })
}

/// A class's limits as the engine checks them against the process's leases (`Limits.leasable`:
/// `[concurrency key or nil, limit, rate key or nil]`), read from the processor's answer once per
/// class and `run` call instead of for every job.
struct LeasedLimits {
    conc: Option<(String, u64)>,
    rate: Option<String>,
}

impl LeasedLimits {
    /// `None` when the answer is not of that shape: the class's jobs then go to Ruby.
    fn read(limits: RArray) -> Option<Self> {
        let conc: Option<RString> = limits.entry(0).ok()?;
        let cap: u64 = limits.entry(1).ok()?;
        let rate: Option<RString> = limits.entry(2).ok()?;
        Some(Self {
            conc: match conc {
                Some(key) => Some((key.to_string().ok()?, cap)),
                None => None,
            },
            rate: match rate {
                Some(key) => Some(key.to_string().ok()?),
                None => None,
            },
        })
    }

    /// Whether the running job's limits are covered by what the process leased: the slot and
    /// token are taken in memory (no Redis call), as `Limits.held_back?` takes them first. False:
    /// the job goes to Ruby, which asks Redis (nothing was taken).
    fn leased(&self, fetcher: &mut queue_core::fetch::Fetcher) -> bool {
        let conc = self.conc.as_ref().map(|(key, cap)| (key.as_str(), *cap));
        fetcher
            .limit_leased_keys(conc, self.rate.as_deref())
            .is_some()
    }
}

impl Fetcher {
    /// What `Processor#process` (and `Batch::Runner`) do for a job that asks nothing more: the
    /// worker, its `jid` (and `bid`, for a batch's job); its key released; for a batch's job,
    /// nothing more if the batch was invalidated (the job counts as done unrun, its worker made for
    /// nothing), else the thread's running batch; the job as the log context; `perform(*args)`.
    fn perform(
        &self,
        ruby: &Ruby,
        class: &Class,
        context: Value,
        top: &Top,
        args: Args,
        processor: Value,
    ) -> Result<(), Error> {
        let bid = RString::from_value(top.bid);
        let takes_bid = class.bid != Setter::None;
        let worker = make_worker(ruby, class, top.jid, bid.filter(|_| takes_bid), processor)?;
        // Asked of the engine only for a job that may hold a key; a guard taken in the `if let`
        // below would live through its body.
        let holds = holds_key(top, false) && !self.lock().running_key_released();
        if let (true, Some(key), Some(jid)) = (
            holds,
            RString::from_value(top.key),
            RString::from_value(top.jid),
        ) {
            // As `Processor#deduplicated`: released now (until_executing, an unreplied write) or
            // with the job's end (until_executed); no positions to read (no `wal_locations`).
            let (until_executed, ttl, reschedule) = class.dedup;
            let release = Release {
                key: key.to_string()?,
                jid: jid.to_string()?,
                ttl,
                reschedule,
            };
            self.lock()
                .dedup(release, until_executed, false)
                .map_err(crate::errors::to_ruby)?;
        }
        if let Some(bid) = bid {
            if !self.batch_valid(bid)? {
                return Ok(());
            }
        }
        run_job(ruby, worker, context, args, bid)
    }

    /// Whether the batch is valid: from the last second's answer, or one round trip with the GVL
    /// released.
    fn batch_valid(&self, bid: RString) -> Result<bool, Error> {
        // SAFETY: the job's bid String, unchanged while borrowed: no Ruby code runs meanwhile.
        let cached = self.lock().batch_valid_cached(unsafe { bid.as_slice() });
        if let Some(valid) = cached {
            return Ok(valid);
        }
        let bid = bid.to_string()?;
        let inner = &self.inner;
        blocking(move || {
            inner
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .batch_valid(&bid)
        })
    }
}

/// `klass.new` (an allocation when that is all it does), then `jid=`, `_context=` and `bid=` as the
/// class takes them: one protected call for the lot (each `funcall` would be a `rb_protect` of its
/// own).
fn make_worker(
    ruby: &Ruby,
    class: &Class,
    jid: Value,
    bid: Option<RString>,
    processor: Value,
) -> Result<Value, Error> {
    let (klass, jid, processor) = (class.klass.as_raw(), jid.as_raw(), processor.as_raw());
    let [new, jid_set, context_set, bid_set, jid_ivar, context_ivar, bid_ivar] = [
        &NEW,
        &JID_SET,
        &CONTEXT_SET,
        &BID_SET,
        &JID_IVAR,
        &CONTEXT_IVAR,
        &BID_IVAR,
    ]
    .map(|id| (*id).into_id_with(ruby).as_raw());
    let bid = bid.map(|b| b.as_value().as_raw());
    let (takes_jid, takes_context, takes_bid) = (class.jid, class.context, class.bid);
    let plain_new = class.plain_new;
    let worker = magnus::rb_sys::protect(|| {
        // SAFETY: plain method calls with the GVL held, under `rb_protect`; every argument is
        // held by the caller's frame (the class by the processor's cache, the rest by the job's
        // Hash), and `worker` by this frame for the conservative scan.
        unsafe {
            let worker = if plain_new {
                // What `Class#new` does before calling an `initialize` that does nothing.
                rb_sys::rb_obj_alloc(klass)
            } else {
                rb_sys::rb_funcallv(klass, new, 0, std::ptr::null())
            };
            takes_jid.set(worker, (jid_set, jid_ivar), jid);
            takes_context.set(worker, (context_set, context_ivar), processor);
            if let Some(bid) = bid {
                takes_bid.set(worker, (bid_set, bid_ivar), bid);
            }
            worker
        }
    })?;
    // SAFETY: a VALUE Ruby just returned.
    Ok(unsafe { Value::from_raw(worker) })
}

/// `log` as the thread's log context (the job's Hash, or the fetcher that builds it when asked)
/// and no worker context, the running batch when it has one, `perform(*args)`; then the thread's
/// locals as they were. Two protected calls: one to set the locals and run, one to put them back
/// whatever `perform` did.
fn run_job(
    ruby: &Ruby,
    worker: Value,
    log_context: Value,
    args: Args,
    bid: Option<RString>,
) -> Result<(), Error> {
    let thread = ruby.thread_current();
    let log_before: Value = thread.local_aref(*LOG_CONTEXT)?;
    let context_before: Value = thread.local_aref(*WORKER_CONTEXT)?;
    let batch_before: Option<Value> = match bid {
        Some(_) => Some(thread.local_aref(*BATCH_RUNNING)?),
        None => None,
    };
    let (thread, worker, job) = (thread.as_raw(), worker.as_raw(), log_context.as_raw());
    let [log, context, batch, perform] = [&LOG_CONTEXT, &WORKER_CONTEXT, &BATCH_RUNNING, &PERFORM]
        .map(|id| (*id).into_id_with(ruby).as_raw());
    let had_context = !context_before.is_nil();
    let nil = ruby.qnil().as_raw();
    let result = magnus::rb_sys::protect(|| {
        // SAFETY: GVL held, under `rb_protect`; the values are held by the caller's frame. The
        // arguments are read after the locals are set (which may allocate) and Ruby copies them
        // into the method's frame before any Ruby code runs.
        unsafe {
            rb_sys::rb_thread_local_aset(thread, log, job);
            if had_context {
                rb_sys::rb_thread_local_aset(thread, context, nil);
            }
            if let Some(bid) = bid {
                rb_sys::rb_thread_local_aset(thread, batch, bid.as_raw());
            }
            let (argc, argv) = args.argv();
            rb_sys::rb_funcallv_public(worker, perform, argc as c_int, argv)
        }
    });
    let (log_before, context_before) = (log_before.as_raw(), context_before.as_raw());
    let batch_before = batch_before.map(|b| b.as_raw());
    magnus::rb_sys::protect(|| {
        // SAFETY: as above; the values put back were read from these locals.
        unsafe {
            rb_sys::rb_thread_local_aset(thread, log, log_before);
            if had_context {
                rb_sys::rb_thread_local_aset(thread, context, context_before);
            }
            if let Some(before) = batch_before {
                rb_sys::rb_thread_local_aset(thread, batch, before);
            }
        }
        nil
    })?;
    result.map(|_| ())
}
