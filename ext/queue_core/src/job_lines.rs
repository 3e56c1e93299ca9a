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
//! happened (the time, the job's bytes, the elapsed time), with Ruby's GVL held, so that costs next to
//! nothing; a background thread formats the lines and writes them out every 100 ms (or sooner once
//! many are waiting), and [`flush`] does it at once (shutdown, exit).

use std::fs::File;
use std::io::Write;
use std::mem::ManuallyDrop;
use std::os::fd::FromRawFd;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::{Condvar, LazyLock, Mutex, Once, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use std::borrow::Cow;

use serde_json::Value;

use crate::job_json::TopLevel;

/// How often waiting lines are written out.
const FLUSH_EVERY: Duration = Duration::from_millis(100);
/// Bytes of waiting records that make the writer go at once.
const WAKE_AT: usize = 1 << 20;
/// A job event's message, by its index in the record.
const MESSAGES: [&str; 3] = ["start", "done", "fail"];

static ENABLED: AtomicBool = AtomicBool::new(false);
static FD: AtomicI32 = AtomicI32::new(1);
static SINK: LazyLock<Sink> = LazyLock::new(Sink::default);
static FLUSHER: Once = Once::new();

/// The waiting records, appended to one buffer (no allocation per line): a line the Ruby logger
/// formatted (`L`, its length, its bytes) or a job event the writer formats (`J`, the time and the
/// elapsed time in nanoseconds, the message's index, the thread's prefix and the job's bytes, each
/// with its length). The writer swaps the buffer for its spare one, so neither side allocates once
/// both have grown to the usual size.
#[derive(Default)]
struct Sink {
    records: Mutex<Vec<u8>>,
    wake: Condvar,
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
        records.push(b'L');
        put_bytes(records, bytes);
    });
}

fn append(record: impl FnOnce(&mut Vec<u8>)) {
    FLUSHER.call_once(|| {
        let spawned = std::thread::Builder::new()
            .name("queue-log-writer".to_owned())
            .spawn(writer);
        if let Err(e) = spawned {
            tracing::warn!(error = %e, "no log writer thread; lines wait for a flush");
        }
    });
    let mut records = SINK.records.lock().unwrap_or_else(PoisonError::into_inner);
    record(&mut records);
    if records.len() >= WAKE_AT {
        SINK.wake.notify_one();
    }
}

fn put_bytes(records: &mut Vec<u8>, bytes: &[u8]) {
    let len = u32::try_from(bytes.len()).unwrap_or(u32::MAX);
    records.extend_from_slice(&len.to_le_bytes());
    records.extend_from_slice(&bytes[..len as usize]);
}

/// Writes out whatever waits in the sink, now.
pub fn flush() {
    let waiting = std::mem::take(&mut *SINK.records.lock().unwrap_or_else(PoisonError::into_inner));
    write_out(&waiting);
}

fn writer() {
    let mut spare = Vec::new();
    loop {
        {
            let records = SINK.records.lock().unwrap_or_else(PoisonError::into_inner);
            let (mut records, _) = SINK
                .wake
                .wait_timeout(records, FLUSH_EVERY)
                .unwrap_or_else(PoisonError::into_inner);
            std::mem::swap(&mut *records, &mut spare);
        }
        write_out(&spare);
        spare.clear();
    }
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

    fn u64(&mut self) -> Option<u64> {
        self.take(8)?.try_into().ok().map(u64::from_le_bytes)
    }

    fn bytes(&mut self) -> Option<&'a [u8]> {
        let len = u32::from_le_bytes(self.take(4)?.try_into().ok()?);
        self.take(len as usize)
    }
}

fn write_out(records: &[u8]) {
    if records.is_empty() {
        return;
    }
    let bytes = format_records(records);
    // SAFETY: the descriptor belongs to the Ruby process (its logger's IO); it is borrowed for this
    // write and never closed here.
    let mut out = ManuallyDrop::new(unsafe { File::from_raw_fd(FD.load(Ordering::Relaxed)) });
    // A log that cannot be written (closed pipe, full disk) must not stop the jobs.
    let _ = out.write_all(&bytes);
}

/// The lines the records stand for, in order.
fn format_records(records: &[u8]) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(records.len() + records.len() / 4);
    let mut clock = Timestamps::default();
    let mut reader = Records { bytes: records };
    while let Some(tag) = reader.take(1) {
        let written = match tag[0] {
            b'L' => reader.bytes().map(|line| bytes.extend_from_slice(line)),
            b'J' => write_job(&mut reader, &mut clock, &mut bytes),
            _ => None,
        };
        if written.is_none() {
            break; // cannot happen: only this file writes records
        }
    }
    bytes
}

fn write_job(reader: &mut Records<'_>, clock: &mut Timestamps, out: &mut Vec<u8>) -> Option<()> {
    let at = UNIX_EPOCH + Duration::from_nanos(reader.u64()?);
    let elapsed = Some(reader.u64()?)
        .filter(|n| *n != u64::MAX)
        .map(Duration::from_nanos);
    let message = MESSAGES.get(usize::from(reader.take(1)?[0]))?;
    let prefix = std::str::from_utf8(reader.bytes()?).ok()?;
    let raw = reader.bytes()?;
    clock.write(at, out);
    format_line(out, prefix, &Context::of(raw), elapsed, message);
    Some(())
}

/// Formats times as Sidekiq writes them, `2026-11-23T11:45:00.123Z`, the date and time once per
/// second.
#[derive(Default)]
struct Timestamps {
    second: u64,
    prefix: String,
}

impl Timestamps {
    fn write(&mut self, at: SystemTime, out: &mut Vec<u8>) {
        let since = at.duration_since(UNIX_EPOCH).unwrap_or_default();
        let second = since.as_secs();
        if self.prefix.is_empty() || second != self.second {
            let t = time::OffsetDateTime::from_unix_timestamp(second as i64)
                .unwrap_or(time::OffsetDateTime::UNIX_EPOCH);
            self.prefix = format!(
                "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.",
                t.year(),
                u8::from(t.month()),
                t.day(),
                t.hour(),
                t.minute(),
                t.second()
            );
            self.second = second;
        }
        out.extend_from_slice(self.prefix.as_bytes());
        let ms = since.subsec_millis();
        out.extend_from_slice(&[
            b'0' + (ms / 100) as u8,
            b'0' + (ms / 10 % 10) as u8,
            b'0' + (ms % 10) as u8,
            b'Z',
        ]);
    }

    #[cfg(test)]
    fn at(&mut self, at: SystemTime) -> String {
        let mut out = Vec::new();
        self.write(at, &mut out);
        String::from_utf8(out).unwrap_or_default()
    }
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

/// One thread's job lines: its pid and tid, written once.
#[derive(Debug, Clone)]
pub struct JobLines {
    prefix: String,
}

impl JobLines {
    pub fn new(tid: &str) -> JobLines {
        JobLines {
            prefix: format!(" pid={} tid={tid}", std::process::id()),
        }
    }

    pub fn start(&self, raw: &[u8]) {
        if enabled() {
            self.record(raw, None, 0);
        }
    }

    pub fn done(&self, raw: &[u8], elapsed: Duration) {
        if enabled() {
            self.record(raw, Some(elapsed), 1);
        }
    }

    pub fn fail(&self, raw: &[u8], elapsed: Duration) {
        if enabled() {
            self.record(raw, Some(elapsed), 2);
        }
    }

    /// Appends the event to the sink: a few copies into a buffer that is already there; the writer
    /// thread formats it.
    fn record(&self, raw: &[u8], elapsed: Option<Duration>, message: u8) {
        let nanos = |d: Duration| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX - 1);
        let at = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, nanos);
        let elapsed = elapsed.map_or(u64::MAX, nanos);
        append(|records| put_job(records, at, elapsed, message, &self.prefix, raw));
    }
}

/// A job event's record (see [`Sink`]); `elapsed` is `u64::MAX` for none.
fn put_job(records: &mut Vec<u8>, at: u64, elapsed: u64, message: u8, prefix: &str, raw: &[u8]) {
    records.push(b'J');
    records.extend_from_slice(&at.to_le_bytes());
    records.extend_from_slice(&elapsed.to_le_bytes());
    records.push(message);
    put_bytes(records, prefix.as_bytes());
    put_bytes(records, raw);
}

fn format_line(
    out: &mut Vec<u8>,
    prefix: &str,
    ctx: &Context,
    elapsed: Option<Duration>,
    message: &str,
) {
    out.extend_from_slice(prefix.as_bytes());
    for (name, value) in [
        (" class=", Some(ctx.class.as_ref())),
        (" jid=", Some(ctx.jid.as_ref())),
        (" bid=", ctx.bid.as_deref()),
        (" tags=", ctx.tags.as_deref()),
    ] {
        if let Some(value) = value {
            out.extend_from_slice(name.as_bytes());
            out.extend_from_slice(value.as_bytes());
        }
    }
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
    let ms = (elapsed.as_micros() + 500) / 1000;
    out.extend_from_slice((ms / 1000).to_string().as_bytes());
    out.push(b'.');
    let mut frac = ms % 1000;
    if frac == 0 {
        out.push(b'0');
        return;
    }
    let mut digits = 3;
    while frac % 10 == 0 {
        frac /= 10;
        digits -= 1;
    }
    let text = format!("{frac:0digits$}");
    out.extend_from_slice(text.as_bytes());
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

    #[test]
    fn records_come_back_as_lines_in_order() {
        let mut records = Vec::new();
        records.push(b'L');
        put_bytes(&mut records, b"a line from Ruby\n");
        let at = 1_763_898_300_123_000_000;
        let raw = br#"{"class":"HardWorker","jid":"abc"}"#;
        put_job(&mut records, at, u64::MAX, 0, " pid=7 tid=t1", raw);
        put_job(&mut records, at, 12_400_000, 1, " pid=7 tid=t1", raw);
        let text = String::from_utf8(format_records(&records)).expect("utf-8");
        assert_eq!(
            text,
            "a line from Ruby\n\
             2025-11-23T11:45:00.123Z pid=7 tid=t1 class=HardWorker jid=abc INFO: start\n\
             2025-11-23T11:45:00.123Z pid=7 tid=t1 class=HardWorker jid=abc elapsed=0.012 INFO: done\n"
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
            Timestamps::default().write(SystemTime::now(), &mut out);
            format_line(&mut out, " pid=7 tid=t1", &ctx, elapsed, message);
            String::from_utf8(out).expect("utf-8")
        };
        let line = line(Some(Duration::from_micros(12_400)), "done");
        let (time, rest) = line.split_at(24);
        assert!(time.ends_with('Z') && time.as_bytes()[10] == b'T', "{line}");
        assert_eq!(
            rest,
            " pid=7 tid=t1 class=HardWorker jid=abc tags=x,y elapsed=0.012 INFO: done\n"
        );
        let mut start = Vec::new();
        format_line(&mut start, " pid=7 tid=t1", &ctx, None, "start");
        assert!(start.ends_with(b"jid=abc tags=x,y INFO: start\n"));
        for (micros, text) in [
            (2_000_000, "2.0"),
            (0, "0.0"),
            (400, "0.0"),
            (1_500_000, "1.5"),
            (10_000, "0.01"),
            (12_400, "0.012"),
            (61_999_600, "62.0"),
        ] {
            let mut out = Vec::new();
            write_seconds(&mut out, Duration::from_micros(micros));
            assert_eq!(String::from_utf8(out).expect("utf-8"), text, "{micros} µs");
        }
    }
}
