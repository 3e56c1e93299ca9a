//! Sidekiq's per-job log lines, written by the engine: `start` when a fetcher hands a job to its
//! thread, `done` or `fail` when the job is settled, with the elapsed seconds from the engine's clock.
//!
//! ```text
//! 2026-11-23T11:45:00.123Z pid=4242 tid=1x9k class=HardWorker jid=4f3c… INFO: start
//! 2026-11-23T11:45:00.135Z pid=4242 tid=1x9k class=HardWorker jid=4f3c… elapsed=0.012 INFO: done
//! ```
//!
//! The shape is Sidekiq 6.4.1's `Pretty` formatter with its job context (`class` — `display_class`
//! or `wrapped` when present, as ActiveJob jobs have — `jid`, `bid` and `tags` when present). Entries
//! go into one process-wide queue together with everything the Ruby logger writes through [`sink`],
//! so the job's own lines stay between its `start` and `done`. The processor thread only records what
//! happened, with Ruby's GVL held, so that costs next to nothing: for `start` the time, the thread's
//! prefix and the job's `class` and `jid` as its outline found them, or its whole bytes when the
//! outline cannot tell what its lines show (see [`JobLines::start`]); for `done`/`fail` only the
//! time, the elapsed time and which thread it is, since the writer keeps the context it read from
//! that thread's `start`. A background thread formats the lines (reading a job's JSON only when its
//! `start` brought the whole) and writes them out 100 ms after the first one waits (or sooner once
//! many are waiting), and [`flush`] does it at once (shutdown, exit).

use std::collections::HashMap;
use std::fs::File;
use std::io::Write;
use std::mem::ManuallyDrop;
use std::ops::Range;
use std::os::fd::FromRawFd;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, Ordering};
use std::sync::{Condvar, LazyLock, Mutex, MutexGuard, Once, PoisonError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use std::borrow::Cow;
use std::cell::Cell;

use serde_json::Value;

use crate::job_json::TopLevel;
use crate::job_outline::Outline;
use crate::plain_json;

/// How long the first waiting line waits for others before they are written out together.
const FLUSH_EVERY: Duration = Duration::from_millis(100);
/// Bytes of waiting records that make the writer go at once.
const WAKE_AT: usize = 1 << 20;
/// A job event's message, by its index in the record ([`Event`] as a number).
const MESSAGES: [&str; 5] = ["start", "done", "fail", "expired", "deferred"];
/// `elapsed` in a record that has none (`start`).
const NO_ELAPSED: u64 = u64::MAX;

/// The record tags (see [`Sink`]).
const LINE: u8 = b'L';
const START: u8 = b'S';
const PLAIN_START: u8 = b'P';
const END: u8 = b'E';
const JOB: u8 = b'J';
const EVENT: u8 = b'C';
const FORGET: u8 = b'X';

static ENABLED: AtomicBool = AtomicBool::new(false);
static FD: AtomicI32 = AtomicI32::new(1);
static NEXT_THREAD: AtomicU32 = AtomicU32::new(0);
static SINK: LazyLock<Sink> = LazyLock::new(Sink::default);
static FLUSHER: Once = Once::new();

/// The waiting records, appended to one buffer (no allocation per line), each a tag then its
/// fields (numbers little-endian, byte strings after their `u32` length):
///
/// - `L` bytes: whole lines the Ruby logger formatted;
/// - `S` thread, time, prefix, job: a job's `start` (time in nanoseconds since the epoch);
/// - `P` thread, time, prefix, class, jid: a job's `start` that brings only those two, as written
///   in its JSON (escapes kept, quotes left out: [`context_fields`]);
/// - `E` thread, time, elapsed, message: the `done`/`fail` of the job that thread last started;
/// - `J` time, elapsed, message, prefix, job: a job event standing alone (its `start` was not
///   recorded: lines were turned on while it ran);
/// - `C` time, elapsed, message, context: an event whose context the caller wrote (an ordered batch's
///   ` pid=… tid=… class=… ids=… count=…`, see [`event`]);
/// - `X` thread: the thread is gone; the writer forgets its context.
///
/// [`Output`] swaps the buffer for its spare one, so neither side allocates once both have grown to
/// the usual size. It is held while a batch is formatted and written, so batches go out in order
/// and [`flush`] returns only once every line recorded before it is written.
#[derive(Default)]
struct Sink {
    records: Mutex<Vec<u8>>,
    wake: Condvar,
    output: Mutex<Output>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Turns the engine's job lines on or off, and names the file descriptor the sink writes to (the
/// Ruby logger's, normally stdout).
pub fn configure(enabled: bool, fd: i32) {
    FD.store(fd, Ordering::Relaxed);
    ENABLED.store(enabled, Ordering::Relaxed);
}

pub fn enabled() -> bool {
    ENABLED.load(Ordering::Relaxed)
}

/// Adds whole lines, formatted, to the sink; they are written out within 100 ms.
pub fn sink(bytes: &[u8]) {
    append(|records| {
        records.push(LINE);
        put_bytes(records, bytes);
    });
}

/// Appends one record. Wakes the writer when the buffer was empty (it sleeps until there is
/// something to write) and when the buffer grows past [`WAKE_AT`]; not for every record.
fn append(record: impl FnOnce(&mut Vec<u8>)) {
    FLUSHER.call_once(|| {
        let spawned = std::thread::Builder::new()
            .name("queue-log-writer".to_owned())
            .spawn(writer);
        if let Err(e) = spawned {
            tracing::warn!(error = %e, "no log writer thread; lines wait for a flush");
        }
    });
    let mut records = lock(&SINK.records);
    let before = records.len();
    record(&mut records);
    if before == 0 || (before < WAKE_AT && records.len() >= WAKE_AT) {
        SINK.wake.notify_one();
    }
}

fn put_bytes(records: &mut Vec<u8>, bytes: &[u8]) {
    let len = u32::try_from(bytes.len()).unwrap_or(u32::MAX);
    records.extend_from_slice(&len.to_le_bytes());
    records.extend_from_slice(&bytes[..len as usize]);
}

/// A job event: its line's `message`. [`event`] takes the first three from Ruby (an ordered batch's);
/// `Expired` and `Deferred` are a plain job's only (`JobLines::expired`, `JobLines::deferred`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    Start = 0,
    Done = 1,
    Fail = 2,
    Expired = 3,
    Deferred = 4,
}

/// An event number that is none of [`Event`]'s.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown job event {0}: expected 0 (start), 1 (done) or 2 (fail)")]
pub struct UnknownEvent(pub i64);

impl TryFrom<i64> for Event {
    type Error = UnknownEvent;

    fn try_from(n: i64) -> Result<Event, UnknownEvent> {
        match n {
            0 => Ok(Event::Start),
            1 => Ok(Event::Done),
            2 => Ok(Event::Fail),
            other => Err(UnknownEvent(other)),
        }
    }
}

/// Records an event with the context its caller formatted (` pid=… tid=… class=… ids=…`), as the
/// line `… <context>[ elapsed=…] INFO: <event>`, timed now, written with the job lines: an ordered
/// batch's `start` and `done`/`fail`, which cost a Ruby formatter call each otherwise. Nothing when
/// the job lines are off.
pub fn event(context: &[u8], event: Event, elapsed: Option<Duration>) {
    if !enabled() {
        return;
    }
    let at = nanos_since_epoch(SystemTime::now());
    let elapsed = elapsed.map_or(NO_ELAPSED, |e| {
        u64::try_from(e.as_nanos()).unwrap_or(NO_ELAPSED - 1)
    });
    append(|records| put_event(records, at, elapsed, event as u8, context));
}

/// Writes out whatever waits in the sink, now (after any batch the writer is writing).
pub fn flush() {
    lock(&SINK.output).write_waiting();
}

/// The writer thread: asleep while nothing waits; once a record arrives, gives the others
/// [`FLUSH_EVERY`] to join it (less if [`WAKE_AT`] bytes pile up), then writes them all at once.
fn writer() {
    yield_to_jobs();
    loop {
        {
            let mut records = lock(&SINK.records);
            while records.is_empty() {
                records = SINK
                    .wake
                    .wait(records)
                    .unwrap_or_else(PoisonError::into_inner);
            }
            let deadline = Instant::now() + FLUSH_EVERY;
            while records.len() < WAKE_AT {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    break;
                }
                records = SINK
                    .wake
                    .wait_timeout(records, left)
                    .unwrap_or_else(PoisonError::into_inner)
                    .0;
            }
        }
        lock(&SINK.output).write_waiting();
    }
}

/// Lowers the writer thread's priority (nice 10, this thread only): formatting lines must not take
/// a core from the processor threads or from a Redis on the same machine when the CPUs are busy;
/// an idle CPU still runs it at once.
fn yield_to_jobs() {
    // SAFETY: gettid and setpriority on this thread only; a failure leaves the priority as it was.
    unsafe {
        let tid = libc::syscall(libc::SYS_gettid) as libc::id_t;
        libc::setpriority(libc::PRIO_PROCESS, tid, 10);
    }
}

/// The writer's side: its spare record buffer, the text it formats into, the clock's cached date
/// and each thread's running job as its lines show it (` pid=… tid=… class=… jid=…`).
#[derive(Default)]
struct Output {
    batch: Vec<u8>,
    text: Vec<u8>,
    clock: Timestamps,
    running: HashMap<u32, Vec<u8>, foldhash::fast::RandomState>,
}

impl Output {
    /// Takes the waiting records (a swap with the spare buffer), formats and writes them.
    fn write_waiting(&mut self) {
        std::mem::swap(&mut *lock(&SINK.records), &mut self.batch);
        if self.batch.is_empty() {
            return;
        }
        let batch = std::mem::take(&mut self.batch);
        self.format(&batch);
        self.batch = batch;
        self.batch.clear();
        // SAFETY: the descriptor belongs to the Ruby process (its logger's IO); it is borrowed for
        // this write and never closed here.
        let mut out = ManuallyDrop::new(unsafe { File::from_raw_fd(FD.load(Ordering::Relaxed)) });
        // A log that cannot be written (closed pipe, full disk) must not stop the jobs.
        let _ = out.write_all(&self.text);
        self.text.clear();
    }

    /// Appends the lines the records stand for, in order, to `text`.
    fn format(&mut self, records: &[u8]) {
        let mut reader = Records { bytes: records };
        while let Some(tag) = reader.take(1) {
            let read = match tag[0] {
                LINE => reader.bytes().map(|line| self.text.extend_from_slice(line)),
                START => self.start(&mut reader, false),
                PLAIN_START => self.start(&mut reader, true),
                END => self.end(&mut reader),
                JOB => self.job(&mut reader),
                EVENT => self.event(&mut reader),
                FORGET => reader.u32().map(|thread| {
                    self.running.remove(&thread);
                }),
                _ => None,
            };
            if read.is_none() {
                break; // cannot happen: only this file writes records
            }
        }
    }

    /// A `start`: of the job's whole bytes, or of its `class` and `jid` only (`plain`).
    fn start(&mut self, reader: &mut Records<'_>, plain: bool) -> Option<()> {
        let thread = reader.u32()?;
        let at = reader.u64()?;
        let prefix = reader.bytes()?;
        let context = self.running.entry(thread).or_default();
        context.clear();
        if plain {
            let class = unescaped(reader.bytes()?);
            put_class_and_jid(context, prefix, &class, &unescaped(reader.bytes()?));
        } else {
            put_context(context, prefix, &Context::of(reader.bytes()?));
        }
        self.clock.write(at, &mut self.text);
        self.text.extend_from_slice(context);
        put_tail(&mut self.text, None, MESSAGES[0]);
        Some(())
    }

    fn end(&mut self, reader: &mut Records<'_>) -> Option<()> {
        let thread = reader.u32()?;
        let at = reader.u64()?;
        let elapsed = reader.u64()?;
        let message = MESSAGES.get(usize::from(reader.take(1)?[0]))?;
        self.clock.write(at, &mut self.text);
        if let Some(context) = self.running.get(&thread) {
            self.text.extend_from_slice(context);
        }
        put_tail(&mut self.text, duration(elapsed), message);
        Some(())
    }

    fn job(&mut self, reader: &mut Records<'_>) -> Option<()> {
        let at = reader.u64()?;
        let elapsed = reader.u64()?;
        let message = MESSAGES.get(usize::from(reader.take(1)?[0]))?;
        let prefix = reader.bytes()?;
        let raw = reader.bytes()?;
        self.clock.write(at, &mut self.text);
        put_context(&mut self.text, prefix, &Context::of(raw));
        put_tail(&mut self.text, duration(elapsed), message);
        Some(())
    }

    fn event(&mut self, reader: &mut Records<'_>) -> Option<()> {
        let at = reader.u64()?;
        let elapsed = reader.u64()?;
        let message = MESSAGES.get(usize::from(reader.take(1)?[0]))?;
        let context = reader.bytes()?;
        self.clock.write(at, &mut self.text);
        self.text.extend_from_slice(context);
        put_tail(&mut self.text, duration(elapsed), message);
        Some(())
    }
}

fn duration(nanos: u64) -> Option<Duration> {
    (nanos != NO_ELAPSED).then(|| Duration::from_nanos(nanos))
}

/// Reads the sink's records back, in order.
struct Records<'a> {
    bytes: &'a [u8],
}

impl<'a> Records<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let (head, rest) = self.bytes.split_at_checked(n)?;
        self.bytes = rest;
        Some(head)
    }

    fn u32(&mut self) -> Option<u32> {
        self.take(4)?.try_into().ok().map(u32::from_le_bytes)
    }

    fn u64(&mut self) -> Option<u64> {
        self.take(8)?.try_into().ok().map(u64::from_le_bytes)
    }

    fn bytes(&mut self) -> Option<&'a [u8]> {
        let len = self.u32()?;
        self.take(len as usize)
    }
}

/// Formats times as Sidekiq writes them, `2026-11-23T11:45:00.123Z`, the date and time once per
/// second.
#[derive(Default)]
struct Timestamps {
    second: Option<u64>,
    prefix: [u8; 20],
}

impl Timestamps {
    /// Appends the time `nanos` after the epoch.
    fn write(&mut self, nanos: u64, out: &mut Vec<u8>) {
        let second = nanos / 1_000_000_000;
        if self.second != Some(second) {
            let t = time::OffsetDateTime::from_unix_timestamp(second as i64)
                .unwrap_or(time::OffsetDateTime::UNIX_EPOCH);
            let mut prefix = Vec::with_capacity(20);
            put_padded(&mut prefix, t.year().unsigned_abs(), 4);
            prefix.push(b'-');
            put_padded(&mut prefix, u8::from(t.month()), 2);
            prefix.push(b'-');
            put_padded(&mut prefix, t.day(), 2);
            prefix.push(b'T');
            put_padded(&mut prefix, t.hour(), 2);
            prefix.push(b':');
            put_padded(&mut prefix, t.minute(), 2);
            prefix.push(b':');
            put_padded(&mut prefix, t.second(), 2);
            prefix.push(b'.');
            if let Ok(prefix) = prefix.try_into() {
                self.prefix = prefix;
                self.second = Some(second);
            }
        }
        out.extend_from_slice(&self.prefix);
        put_padded(out, nanos / 1_000_000 % 1000, 3);
        out.push(b'Z');
    }

    #[cfg(test)]
    fn at(&mut self, at: SystemTime) -> String {
        let mut out = Vec::new();
        self.write(nanos_since_epoch(at), &mut out);
        String::from_utf8(out).unwrap_or_default()
    }
}

/// Appends `n` in decimal with at least `width` digits (zeros in front).
fn put_padded(out: &mut Vec<u8>, n: impl Into<u64>, width: usize) {
    let mut digits = [b'0'; 20];
    let mut i = digits.len();
    let mut n = n.into();
    loop {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    let from = i.min(digits.len() - width.min(digits.len()));
    out.extend_from_slice(&digits[from..]);
}

fn put_decimal(out: &mut Vec<u8>, n: u64) {
    put_padded(out, n, 1);
}

fn nanos_since_epoch(at: SystemTime) -> u64 {
    at.duration_since(UNIX_EPOCH).map_or(0, nanos)
}

fn nanos(since_epoch: Duration) -> u64 {
    u64::try_from(since_epoch.as_nanos()).unwrap_or(NO_ELAPSED - 1)
}

/// What a job's lines say about it, read from its JSON.
#[derive(Debug, Default, PartialEq)]
struct Context<'a> {
    class: Cow<'a, str>,
    jid: Cow<'a, str>,
    bid: Option<String>,
    tags: Option<String>,
}

impl Context<'_> {
    fn of(raw: &[u8]) -> Context<'_> {
        fast_context(raw).unwrap_or_else(|| parsed_context(raw))
    }
}

/// The common job (`class` and `jid` plain strings, none of the optional fields): read in one pass
/// over the top-level keys, without building the job. `None` sends the job to a full parse.
fn fast_context(raw: &[u8]) -> Option<Context<'_>> {
    let (mut class, mut jid) = (None, None);
    let mut fields = TopLevel::new(raw);
    for field in fields.by_ref() {
        match field.key {
            b"display_class" | b"wrapped" | b"bid" | b"tags" => return None,
            b"class" | b"jid" => {
                let value = match field.string {
                    Some((value, false)) => std::str::from_utf8(value).ok()?,
                    _ => return None,
                };
                if field.key == b"class" {
                    class = Some(value);
                } else {
                    jid = Some(value);
                }
            }
            _ => {}
        }
    }
    if fields.malformed() {
        return None;
    }
    Some(Context {
        class: Cow::Borrowed(class?),
        jid: Cow::Borrowed(jid?),
        bid: None,
        tags: None,
    })
}

fn parsed_context(raw: &[u8]) -> Context<'static> {
    let Ok(Value::Object(job)) = serde_json::from_slice::<Value>(raw) else {
        return Context::default();
    };
    let text = |v: &Value| match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    let class = ["display_class", "wrapped", "class"]
        .iter()
        .find_map(|f| job.get(*f).filter(|v| !v.is_null()).map(text))
        .unwrap_or_default();
    let tags = job.get("tags").map(|v| match v {
        Value::Array(items) => items.iter().map(text).collect::<Vec<_>>().join(","),
        other => text(other),
    });
    Context {
        class: class.into(),
        jid: job.get("jid").map(text).unwrap_or_default().into(),
        bid: job.get("bid").map(text),
        tags,
    }
}

/// One thread's job lines: its pid and tid, written once, and whether the writer knows the job it
/// is running (its `start` was recorded).
#[derive(Debug)]
pub struct JobLines {
    thread: u32,
    prefix: String,
    started: Cell<bool>,
    /// When the recorded `start` was, in nanoseconds since the epoch: its end is dated from it.
    started_at: Cell<u64>,
    recorded: Cell<bool>,
}

impl JobLines {
    pub fn new(tid: &str) -> JobLines {
        JobLines {
            thread: NEXT_THREAD.fetch_add(1, Ordering::Relaxed),
            prefix: format!(" pid={} tid={tid}", std::process::id()),
            started: Cell::new(false),
            started_at: Cell::new(0),
            recorded: Cell::new(false),
        }
    }

    /// Records the job's `start`, at the time since the epoch `at` gives (asked only when lines are
    /// on). When the job's `outline` shows what its lines say of it ([`context_fields`]), only its
    /// `class` and `jid` are copied; else its whole bytes, which the writer reads.
    pub fn start(&self, raw: &[u8], outline: Option<&Outline>, at: impl FnOnce() -> Duration) {
        let on = enabled();
        if on {
            let at = nanos(at());
            self.started_at.set(at);
            let fields = outline.and_then(|outline| context_fields(raw, outline));
            append(|records| match fields {
                Some((class, jid)) => {
                    put_plain_start(records, self.thread, at, &self.prefix, class, jid)
                }
                None => put_start(records, self.thread, at, &self.prefix, raw),
            });
            self.recorded.set(true);
        }
        self.started.set(on);
    }

    pub fn done(&self, raw: &[u8], elapsed: Duration) {
        self.end(raw, elapsed, Event::Done);
    }

    pub fn fail(&self, raw: &[u8], elapsed: Duration) {
        self.end(raw, elapsed, Event::Fail);
    }

    /// The job was dropped unrun: its `expires_at` had passed when it was to start.
    pub fn expired(&self, raw: &[u8], elapsed: Duration) {
        self.end(raw, elapsed, Event::Expired);
    }

    /// The job was held back unrun by its concurrency or rate limit (`limits`): deferred, or
    /// rescheduled for later.
    pub fn deferred(&self, raw: &[u8], elapsed: Duration) {
        self.end(raw, elapsed, Event::Deferred);
    }

    /// Records `done`, `fail`, `expired` or `deferred` (`elapsed` after the start): a few bytes when
    /// the writer knows the job from its `start`, and dated from it; else the job's bytes too,
    /// dated now.
    fn end(&self, raw: &[u8], elapsed: Duration, event: Event) {
        let message = event as u8;
        let started = self.started.replace(false);
        if !enabled() {
            return;
        }
        let elapsed = u64::try_from(elapsed.as_nanos()).unwrap_or(NO_ELAPSED - 1);
        let at = if started {
            self.started_at.get().saturating_add(elapsed)
        } else {
            nanos_since_epoch(SystemTime::now())
        };
        if started {
            append(|records| put_end(records, self.thread, at, elapsed, message));
        } else {
            append(|records| put_job(records, at, elapsed, message, &self.prefix, raw));
        }
    }
}

impl Drop for JobLines {
    fn drop(&mut self) {
        if self.recorded.get() {
            append(|records| {
                records.push(FORGET);
                records.extend_from_slice(&self.thread.to_le_bytes());
            });
        }
    }
}

fn put_start(records: &mut Vec<u8>, thread: u32, at: u64, prefix: &str, raw: &[u8]) {
    put_start_head(records, START, thread, at, prefix);
    put_bytes(records, raw);
}

fn put_plain_start(
    records: &mut Vec<u8>,
    thread: u32,
    at: u64,
    prefix: &str,
    class: &[u8],
    jid: &[u8],
) {
    put_start_head(records, PLAIN_START, thread, at, prefix);
    put_bytes(records, class);
    put_bytes(records, jid);
}

/// What both `start` records begin with: the tag, the thread, the time and the thread's prefix.
/// Inlined: a `start` is recorded with the GVL held.
#[inline(always)]
fn put_start_head(records: &mut Vec<u8>, tag: u8, thread: u32, at: u64, prefix: &str) {
    records.push(tag);
    records.extend_from_slice(&thread.to_le_bytes());
    records.extend_from_slice(&at.to_le_bytes());
    put_bytes(records, prefix.as_bytes());
}

/// The `class` and `jid` a job's lines show, as written in it (still escaped), taken from where its
/// `outline` found them with no pass over its bytes: when both are strings and the job has none of
/// the keys that change its lines' context (`display_class`, `wrapped`, `bid`, `tags`).
fn context_fields<'r>(raw: &'r [u8], outline: &Outline) -> Option<(&'r [u8], &'r [u8])> {
    let marks = outline.marks;
    if marks.display_class || marks.wrapped || marks.tags || outline.bid.is_some() {
        return None;
    }
    let class = string_contents(raw, outline.class.clone()?)?;
    Some((class, string_contents(raw, outline.jid.clone()?)?))
}

/// The contents of the string value that lies at `at`, its quotes included.
fn string_contents(raw: &[u8], at: Range<usize>) -> Option<&[u8]> {
    raw.get(at)?.strip_prefix(b"\"")?.strip_suffix(b"\"")
}

/// A string's contents as written in a job's JSON, unescaped. An outline is made only of JSON whose
/// strings are valid UTF-8 and hold no escapes but those [`plain_json::unescape`] knows.
fn unescaped(text: &[u8]) -> Cow<'_, [u8]> {
    if !text.contains(&b'\\') {
        return Cow::Borrowed(text);
    }
    let mut out = Vec::with_capacity(text.len());
    let mut bytes = text.iter();
    while let Some(&b) = bytes.next() {
        if b != b'\\' {
            out.push(b);
            continue;
        }
        if let Some(&escape) = bytes.next() {
            out.push(plain_json::unescape(escape).unwrap_or(escape));
        }
    }
    Cow::Owned(out)
}

fn put_end(records: &mut Vec<u8>, thread: u32, at: u64, elapsed: u64, message: u8) {
    records.push(END);
    records.extend_from_slice(&thread.to_le_bytes());
    records.extend_from_slice(&at.to_le_bytes());
    records.extend_from_slice(&elapsed.to_le_bytes());
    records.push(message);
}

/// A job event standing alone; `elapsed` is [`NO_ELAPSED`] for none.
fn put_job(records: &mut Vec<u8>, at: u64, elapsed: u64, message: u8, prefix: &str, raw: &[u8]) {
    records.push(JOB);
    records.extend_from_slice(&at.to_le_bytes());
    records.extend_from_slice(&elapsed.to_le_bytes());
    records.push(message);
    put_bytes(records, prefix.as_bytes());
    put_bytes(records, raw);
}

fn put_event(records: &mut Vec<u8>, at: u64, elapsed: u64, message: u8, context: &[u8]) {
    records.push(EVENT);
    records.extend_from_slice(&at.to_le_bytes());
    records.extend_from_slice(&elapsed.to_le_bytes());
    records.push(message);
    put_bytes(records, context);
}

/// ` pid=… tid=… class=… jid=…` and `bid`/`tags` when the job has them.
fn put_context(out: &mut Vec<u8>, prefix: &[u8], ctx: &Context) {
    put_class_and_jid(out, prefix, ctx.class.as_bytes(), ctx.jid.as_bytes());
    for (name, value) in [(" bid=", &ctx.bid), (" tags=", &ctx.tags)] {
        if let Some(value) = value {
            out.extend_from_slice(name.as_bytes());
            out.extend_from_slice(value.as_bytes());
        }
    }
}

/// ` pid=… tid=… class=… jid=…`.
fn put_class_and_jid(out: &mut Vec<u8>, prefix: &[u8], class: &[u8], jid: &[u8]) {
    out.extend_from_slice(prefix);
    out.extend_from_slice(b" class=");
    out.extend_from_slice(class);
    out.extend_from_slice(b" jid=");
    out.extend_from_slice(jid);
}

/// ` elapsed=… INFO: message` and the newline.
fn put_tail(out: &mut Vec<u8>, elapsed: Option<Duration>, message: &str) {
    if let Some(elapsed) = elapsed {
        out.extend_from_slice(b" elapsed=");
        write_seconds(out, elapsed);
    }
    out.extend_from_slice(b" INFO: ");
    out.extend_from_slice(message.as_bytes());
    out.push(b'\n');
}

/// Seconds rounded to milliseconds as Ruby prints the Float Sidekiq logs: `0.0`, `0.012`, `1.5`.
fn write_seconds(out: &mut Vec<u8>, elapsed: Duration) {
    let ms = u64::try_from((elapsed.as_micros() + 500) / 1000).unwrap_or(u64::MAX);
    put_decimal(out, ms / 1000);
    out.push(b'.');
    let mut frac = (ms % 1000) as u32;
    if frac == 0 {
        out.push(b'0');
        return;
    }
    let mut digits = 3;
    while frac % 10 == 0 {
        frac /= 10;
        digits -= 1;
    }
    put_padded(out, frac, digits);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plain_job_is_read_without_a_parse() {
        let raw = br#"{"retry":true,"queue":"default","class":"HardWorker","args":[1],"jid":"abc123","created_at":1.5}"#;
        let ctx = fast_context(raw).expect("fast");
        assert_eq!(
            (ctx.class.as_ref(), ctx.jid.as_ref()),
            ("HardWorker", "abc123")
        );
        assert_eq!(Context::of(raw), ctx);
    }

    #[test]
    fn only_top_level_keys_count() {
        let raw = br#"{"args":[{"class":"Inner","jid":"x","tags":[1]}],"jid":"outer1","class":"Outer","note":"\"jid\":\"no\""}"#;
        let ctx = fast_context(raw).expect("fast");
        assert_eq!((ctx.class.as_ref(), ctx.jid.as_ref()), ("Outer", "outer1"));
        assert!(fast_context(br#"{"class":"A","jid":"j","bid":"b"}"#).is_none());
        assert!(fast_context(br#"{"class":"A\u0041","jid":"j"}"#).is_none());
        assert!(fast_context(br#"{"class":"A"}"#).is_none());
    }

    #[test]
    fn wrapped_jobs_bids_and_tags_are_read_as_sidekiq_shows_them() {
        let raw = br#"{"class":"ActiveJob::Wrapper","wrapped":"SignupJob","jid":"j1","bid":"b9","tags":["a","b"]}"#;
        assert!(fast_context(raw).is_none());
        let ctx = Context::of(raw);
        assert_eq!(ctx.class, "SignupJob");
        assert_eq!(ctx.bid.as_deref(), Some("b9"));
        assert_eq!(ctx.tags.as_deref(), Some("a,b"));
    }

    const AT: u64 = 1_763_898_300_123_000_000;

    fn formatted(output: &mut Output, records: &[u8]) -> String {
        output.format(records);
        String::from_utf8(std::mem::take(&mut output.text)).expect("utf-8")
    }

    #[test]
    fn records_come_back_as_lines_in_order() {
        let mut records = Vec::new();
        records.push(LINE);
        put_bytes(&mut records, b"a line from Ruby\n");
        let raw = br#"{"class":"HardWorker","jid":"abc"}"#;
        let other = br#"{"class":"Other","jid":"xyz","bid":"b1"}"#;
        put_start(&mut records, 1, AT, " pid=7 tid=t1", raw);
        put_start(&mut records, 2, AT + 1_000_000, " pid=7 tid=t2", other);
        put_end(&mut records, 1, AT + 13_000_000, 12_400_000, 1);
        put_job(&mut records, AT, NO_ELAPSED, 0, " pid=7 tid=t3", raw);
        put_job(&mut records, AT, 1_500_000_000, 2, " pid=7 tid=t3", raw);
        put_event(
            &mut records,
            AT,
            NO_ELAPSED,
            Event::Start as u8,
            b" pid=7 tid=t4 class=W ids=a,b count=2",
        );
        put_event(
            &mut records,
            AT,
            4_000_000,
            Event::Fail as u8,
            b" pid=7 tid=t4 class=W ids=a,b count=2",
        );
        let text = formatted(&mut Output::default(), &records);
        assert_eq!(
            text,
            "a line from Ruby\n\
             2025-11-23T11:45:00.123Z pid=7 tid=t1 class=HardWorker jid=abc INFO: start\n\
             2025-11-23T11:45:00.124Z pid=7 tid=t2 class=Other jid=xyz bid=b1 INFO: start\n\
             2025-11-23T11:45:00.136Z pid=7 tid=t1 class=HardWorker jid=abc elapsed=0.012 INFO: done\n\
             2025-11-23T11:45:00.123Z pid=7 tid=t3 class=HardWorker jid=abc INFO: start\n\
             2025-11-23T11:45:00.123Z pid=7 tid=t3 class=HardWorker jid=abc elapsed=1.5 INFO: fail\n\
             2025-11-23T11:45:00.123Z pid=7 tid=t4 class=W ids=a,b count=2 INFO: start\n\
             2025-11-23T11:45:00.123Z pid=7 tid=t4 class=W ids=a,b count=2 elapsed=0.004 INFO: fail\n"
        );
        assert_eq!(Event::try_from(1), Ok(Event::Done));
        assert_eq!(Event::try_from(3), Err(UnknownEvent(3)));
    }

    #[test]
    fn an_end_finds_its_start_in_an_earlier_batch_until_the_thread_is_forgotten() {
        let mut output = Output::default();
        let mut first = Vec::new();
        put_start(
            &mut first,
            9,
            AT,
            " pid=7 tid=t9",
            br#"{"jid":"j9","class":"Nine"}"#,
        );
        formatted(&mut output, &first);
        let mut second = Vec::new();
        put_end(&mut second, 9, AT, 0, 2);
        assert_eq!(
            formatted(&mut output, &second),
            "2025-11-23T11:45:00.123Z pid=7 tid=t9 class=Nine jid=j9 elapsed=0.0 INFO: fail\n"
        );
        let mut gone = vec![FORGET];
        gone.extend_from_slice(&9u32.to_le_bytes());
        formatted(&mut output, &gone);
        assert!(output.running.is_empty());
    }

    #[test]
    fn a_start_with_its_fields_reads_as_the_job_read_whole() {
        let with_fields = [
            (
                &br#"{"retry":true,"queue":"default","class":"HardWorker","args":[{"jid":"no","bid":"x"}],"jid":"abc","created_at":1.5}"#[..],
                " class=HardWorker jid=abc INFO",
            ),
            (
                br#"{"jid":"j1","class":"A::B","tags_note":"t","jid":"j2"}"#,
                " class=A::B jid=j2 INFO",
            ),
            // Taken as written and unescaped by the writer.
            (
                br#"{"class":"A\"B\\C\/D","jid":"j\tk"}"#,
                " class=A\"B\\C/D jid=j\tk INFO",
            ),
        ];
        for (raw, shown) in with_fields {
            let outline = Outline::of(raw).expect("an outline");
            let (class, jid) = context_fields(raw, &outline).expect("the fields");
            let (mut whole, mut with) = (Vec::new(), Vec::new());
            put_start(&mut whole, 1, AT, " pid=7 tid=t1", raw);
            put_plain_start(&mut with, 1, AT, " pid=7 tid=t1", class, jid);
            let line = formatted(&mut Output::default(), &whole);
            assert_eq!(formatted(&mut Output::default(), &with), line);
            assert!(line.contains(shown), "{line}");
        }
        // What changes the context, or a value that is not a string, goes without them.
        for raw in [
            &br#"{"class":"A","jid":"j","bid":"b"}"#[..],
            br#"{"class":"A","jid":"j","bid":null}"#,
            br#"{"class":"A","jid":"j","tags":["x"]}"#,
            br#"{"class":"ActiveJob::Wrapper","wrapped":"W","jid":"j"}"#,
            br#"{"class":"A","display_class":"D","jid":"j"}"#,
            br#"{"class":"A","jid":7}"#,
            br#"{"class":"A"}"#,
        ] {
            let outline = Outline::of(raw).expect("an outline");
            let fields = context_fields(raw, &outline);
            assert_eq!(fields, None, "{}", String::from_utf8_lossy(raw));
        }
    }

    #[test]
    fn job_lines_reach_the_descriptor_by_flush_in_order() {
        use std::io::Read;
        use std::os::fd::AsRawFd;
        use std::os::unix::net::UnixStream;

        let (ours, mut theirs) = UnixStream::pair().expect("socket pair");
        configure(true, ours.as_raw_fd());
        let lines = JobLines::new("tq");
        let raw = br#"{"class":"HardWorker","jid":"abc"}"#;
        let now = || {
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap_or_default()
        };
        let outline = Outline::of(raw);
        assert!(outline
            .as_ref()
            .is_some_and(|o| context_fields(raw, o).is_some()));
        lines.start(raw, outline.as_ref(), now);
        sink(b"from Ruby\n");
        lines.done(raw, Duration::from_millis(5));
        lines.start(raw, None, now);
        configure(false, ours.as_raw_fd());
        lines.fail(raw, Duration::from_millis(5)); // off: no line
        configure(true, ours.as_raw_fd());
        lines.done(raw, Duration::from_millis(7)); // its start was not recorded: stands alone
        drop(lines);
        flush();
        configure(false, 1);
        drop(ours);
        let mut text = String::new();
        theirs.read_to_string(&mut text).expect("read");
        let shapes: Vec<&str> = text.lines().map(|l| l.get(24..).unwrap_or(l)).collect();
        // A recorded start's end is dated from it: 5 ms after, to the millisecond.
        let millis = |line: &str| -> u64 {
            let t = line.get(11..23).unwrap_or_default(); // hh:mm:ss.mmm
            let n = |r: std::ops::Range<usize>| t.get(r).and_then(|x| x.parse::<u64>().ok());
            let (h, m, sec, ms) = (n(0..2), n(3..5), n(6..8), n(9..12));
            ((h.unwrap_or(0) * 60 + m.unwrap_or(0)) * 60 + sec.unwrap_or(0)) * 1000
                + ms.unwrap_or(0)
        };
        let all: Vec<&str> = text.lines().collect();
        let (start, done) = (millis(all[0]), millis(all[2]));
        assert!(
            done == start + 5 || (start > done && done + 86_400_000 == start + 5),
            "{all:?}"
        );
        let pid = std::process::id();
        assert_eq!(
            shapes,
            [
                format!(" pid={pid} tid=tq class=HardWorker jid=abc INFO: start"),
                "from Ruby".to_owned(),
                format!(" pid={pid} tid=tq class=HardWorker jid=abc elapsed=0.005 INFO: done"),
                format!(" pid={pid} tid=tq class=HardWorker jid=abc INFO: start"),
                format!(" pid={pid} tid=tq class=HardWorker jid=abc elapsed=0.007 INFO: done"),
            ]
        );
    }

    #[test]
    fn times_are_utc_with_milliseconds() {
        let at = UNIX_EPOCH + Duration::from_millis(1_763_898_300_123);
        let mut clock = Timestamps::default();
        assert_eq!(clock.at(at), "2025-11-23T11:45:00.123Z");
        assert_eq!(
            clock.at(at + Duration::from_millis(1_001)),
            "2025-11-23T11:45:01.124Z"
        );
        assert_eq!(
            clock.at(UNIX_EPOCH + Duration::from_millis(7)),
            "1970-01-01T00:00:00.007Z"
        );
    }

    #[test]
    fn lines_have_sidekiqs_pretty_shape() {
        let ctx = Context {
            class: "HardWorker".into(),
            jid: "abc".into(),
            bid: None,
            tags: Some("x,y".into()),
        };
        let line = |elapsed: Option<Duration>, message: &str| {
            let mut out = Vec::new();
            put_context(&mut out, b" pid=7 tid=t1", &ctx);
            put_tail(&mut out, elapsed, message);
            String::from_utf8(out).expect("utf-8")
        };
        assert_eq!(
            line(Some(Duration::from_micros(12_400)), "done"),
            " pid=7 tid=t1 class=HardWorker jid=abc tags=x,y elapsed=0.012 INFO: done\n"
        );
        assert_eq!(
            line(None, "start"),
            " pid=7 tid=t1 class=HardWorker jid=abc tags=x,y INFO: start\n"
        );
        for (micros, text) in [
            (2_000_000, "2.0"),
            (0, "0.0"),
            (400, "0.0"),
            (1_500_000, "1.5"),
            (10_000, "0.01"),
            (12_400, "0.012"),
            (1_000, "0.001"),
            (61_999_600, "62.0"),
            (123_456_789_000, "123456.789"),
        ] {
            let mut out = Vec::new();
            write_seconds(&mut out, Duration::from_micros(micros));
            assert_eq!(String::from_utf8(out).expect("utf-8"), text, "{micros} µs");
        }
    }
}
