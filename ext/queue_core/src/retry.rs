//! What happens to a job that failed: Sidekiq's retry rules, decided here and written in one step.
//!
//! The processor reports the error (class, message, backtrace) and what the worker's
//! `sidekiq_retry_in` block answered. [`plan`] applies Sidekiq's bookkeeping to the job hash
//! (`retry_count`, `failed_at`/`retried_at`, `error_*`, `retry_queue`) and decides its fate: back to the
//! `retry` set after `count**4 + 15 + rand(10) * (count + 1)` seconds, to the `dead` set (trimmed to
//! 180 days and 10,000 jobs), or dropped. The fetcher then files it with `fail.lua`, which also removes
//! it from the working list and counts it.

use std::io::Write;

use base64::Engine as _;
use rand::Rng;
use serde_json::Value;

use crate::job::{Job, RetryPolicy};

/// Longest error message kept, as Sidekiq does.
pub const MAX_ERROR_MESSAGE: usize = 10_000;
/// Dead jobs older than this are trimmed (Sidekiq's `dead_timeout_in_seconds`).
pub const DEAD_TIMEOUT_SECS: f64 = 180.0 * 24.0 * 3600.0;
/// Dead set size bound (Sidekiq's `dead_max_jobs`).
pub const DEAD_MAX_JOBS: i64 = 10_000;

/// The answer of a worker's `sidekiq_retry_in` block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RetryIn {
    /// No block, or it returned nil or raised: use Sidekiq's formula.
    Default,
    /// Retry after this many seconds (plus Sidekiq's jitter); zero or less means the default.
    Seconds(i64),
    /// Skip the remaining retries: the job is exhausted now.
    Kill,
    /// Drop the job without a trace.
    Discard,
}

/// A worker class's own `retry` option (`sidekiq_options retry: ...`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorkerRetry {
    /// `retry: true` or `retry: false`.
    Flag(bool),
    /// `retry: <n>`.
    Times(i64),
}

/// A failure as the processor saw it.
#[derive(Debug, Clone)]
pub struct Failure {
    pub error_class: String,
    pub error_message: String,
    pub backtrace: Vec<String>,
    pub retry_in: RetryIn,
    /// The failed worker class's `retry` option, `None` if the class is unknown. As in Sidekiq, it
    /// applies to a job that has no `retry` field (pushed by a client that left it out), and is
    /// written into the filed job.
    pub worker_retry: Option<WorkerRetry>,
}

/// Where a failed job goes.
#[derive(Debug, Clone, PartialEq)]
pub enum Fate {
    /// Into `retry`, to run again at this time.
    Retry { at: f64 },
    /// Retries are used up (or the block said `:kill`). `morgue` is false when the job says
    /// `dead: false`. The processor calls `sidekiq_retries_exhausted` and the death handlers.
    Exhausted { morgue: bool },
    /// `retry: false`: not kept anywhere; the processor calls the death handlers.
    NoRetry,
    /// The block said `:discard`.
    Discarded,
}

impl Fate {
    pub fn name(&self) -> &'static str {
        match self {
            Fate::Retry { .. } => "retry",
            Fate::Exhausted { morgue: true } => "dead",
            Fate::Exhausted { morgue: false } => "exhausted",
            Fate::NoRetry => "no_retry",
            Fate::Discarded => "discarded",
        }
    }
}

/// A failed job, updated, and its fate.
#[derive(Debug, Clone)]
pub struct Plan {
    pub fate: Fate,
    /// The job as it is filed (and handed to exhausted/death handlers).
    pub job: Job,
}

/// Applies Sidekiq's retry bookkeeping to `job`, which failed while running from `queue`.
pub fn plan(mut job: Job, queue: &str, failure: &Failure, now: f64) -> Plan {
    if matches!(job.get("retry"), None | Some(Value::Null)) {
        if let Some(option) = failure.worker_retry {
            let value = match option {
                WorkerRetry::Flag(on) => Value::Bool(on),
                WorkerRetry::Times(n) => Value::from(n),
            };
            job.set("retry", value);
        }
    }
    let max = match job.retry_policy() {
        RetryPolicy::Disabled => {
            return Plan {
                fate: Fate::NoRetry,
                job,
            }
        }
        RetryPolicy::UpTo(max) => max,
    };

    let next_queue = job
        .str("retry_queue")
        .map(str::to_owned)
        .unwrap_or_else(|| queue.to_owned());
    job.set("queue", Value::String(next_queue));
    job.set(
        "error_message",
        Value::String(truncate(&failure.error_message, MAX_ERROR_MESSAGE)),
    );
    job.set("error_class", Value::String(failure.error_class.clone()));
    let count = match job.retry_count() {
        Some(previous) => {
            job.stamp("retried_at", now);
            previous + 1
        }
        None => {
            job.stamp("failed_at", now);
            0
        }
    };
    job.set("retry_count", Value::from(count));
    if let Some(lines) = backtrace_lines(&job, &failure.backtrace) {
        job.set("error_backtrace", Value::String(compress_backtrace(lines)));
    }

    let fate = match failure.retry_in {
        RetryIn::Discard => Fate::Discarded,
        _ if count >= max => exhausted(&job),
        RetryIn::Kill => exhausted(&job),
        RetryIn::Seconds(s) if s > 0 => Fate::Retry {
            at: now + (s + jitter(count)) as f64,
        },
        _ => Fate::Retry {
            at: now + default_delay(count) as f64,
        },
    };
    Plan { fate, job }
}

fn exhausted(job: &Job) -> Fate {
    let morgue = !matches!(job.get("dead"), Some(Value::Bool(false)));
    Fate::Exhausted { morgue }
}

/// Sidekiq's backoff: `count**4 + 15 + rand(10) * (count + 1)` seconds.
pub fn default_delay(count: i64) -> i64 {
    count.saturating_pow(4).saturating_add(15) + jitter(count)
}

fn jitter(count: i64) -> i64 {
    rand::rng().random_range(0..10) * (count + 1)
}

fn backtrace_lines<'a>(job: &Job, lines: &'a [String]) -> Option<&'a [String]> {
    match job.get("backtrace") {
        Some(Value::Bool(true)) => Some(lines),
        Some(Value::Number(n)) => {
            let keep = n.as_u64().unwrap_or(0) as usize;
            Some(&lines[..keep.min(lines.len())])
        }
        _ => None,
    }
}

/// Sidekiq's `error_backtrace`: the lines as a JSON array, zlib-deflated, base64 with a newline every
/// 60 characters (Ruby's `Base64.encode64`).
pub fn compress_backtrace(lines: &[String]) -> String {
    let json = serde_json::to_vec(lines).unwrap_or_else(|_| b"[]".to_vec());
    let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
    let deflated = z
        .write_all(&json)
        .and_then(|_| z.finish())
        .unwrap_or_default();
    let encoded = base64::engine::general_purpose::STANDARD.encode(deflated);
    let mut out = String::with_capacity(encoded.len() + encoded.len() / 60 + 1);
    for chunk in encoded.as_bytes().chunks(60) {
        out.push_str(std::str::from_utf8(chunk).unwrap_or_default());
        out.push('\n');
    }
    out
}

fn truncate(s: &str, max_chars: usize) -> String {
    match s.char_indices().nth(max_chars) {
        Some((cut, _)) => s[..cut].to_owned(),
        None => s.to_owned(),
    }
}

/// The dead set's trim bound for a death at `now`.
pub fn dead_cutoff(now: f64) -> f64 {
    now - DEAD_TIMEOUT_SECS
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failure(retry_in: RetryIn) -> Failure {
        Failure {
            error_class: "RuntimeError".into(),
            error_message: "boom".into(),
            backtrace: vec!["a.rb:1".into(), "b.rb:2".into()],
            retry_in,
            worker_retry: None,
        }
    }

    fn job(s: &str) -> Job {
        Job::parse(s.as_bytes()).unwrap()
    }

    #[test]
    fn first_failure_sets_failed_at_and_count_zero() {
        let p = plan(
            job(r#"{"class":"W","retry":true}"#),
            "q",
            &failure(RetryIn::Default),
            100.0,
        );
        assert_eq!(p.job.retry_count(), Some(0));
        assert!(p.job.get("failed_at").is_some());
        assert!(p.job.get("retried_at").is_none());
        assert_eq!(p.job.queue(), Some("q"));
        match p.fate {
            Fate::Retry { at } => assert!((115.0..=124.0).contains(&at)),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn later_failures_count_up_and_use_retry_queue() {
        let p = plan(
            job(r#"{"retry":5,"retry_count":1,"retry_queue":"slow"}"#),
            "q",
            &failure(RetryIn::Default),
            0.0,
        );
        assert_eq!(p.job.retry_count(), Some(2));
        assert!(p.job.get("retried_at").is_some());
        assert_eq!(p.job.queue(), Some("slow"));
    }

    #[test]
    fn a_sidekiq_8_job_gets_millisecond_failure_times() {
        // Sidekiq 8 writes created_at/failed_at/retried_at as integer epoch milliseconds.
        let first = plan(
            job(r#"{"class":"W","retry":true,"created_at":1763985600123}"#),
            "q",
            &failure(RetryIn::Default),
            1763985700.5,
        );
        assert_eq!(
            first.job.get("failed_at"),
            Some(&Value::from(1763985700500_i64))
        );
        match first.fate {
            Fate::Retry { at } => assert!((1763985715.5..=1763985724.5).contains(&at)),
            other => panic!("{other:?}"),
        }
        let later = plan(first.job, "q", &failure(RetryIn::Default), 1763985800.25);
        assert_eq!(
            later.job.get("retried_at"),
            Some(&Value::from(1763985800250_i64))
        );
        assert_eq!(
            later.job.get("failed_at"),
            Some(&Value::from(1763985700500_i64))
        );
        // An older job keeps float seconds.
        let old = plan(
            job(r#"{"class":"W","retry":true,"created_at":1763985600.5}"#),
            "q",
            &failure(RetryIn::Default),
            1763985700.5,
        );
        assert_eq!(
            old.job.get("failed_at").map(ToString::to_string).as_deref(),
            Some("1763985700.5")
        );
    }

    #[test]
    fn exhaustion_and_policies() {
        let fate = |s: &str, r: RetryIn| plan(job(s), "q", &failure(r), 0.0).fate;
        assert_eq!(
            fate(r#"{"retry":0}"#, RetryIn::Default),
            Fate::Exhausted { morgue: true }
        );
        assert_eq!(
            fate(r#"{"retry":0,"dead":false}"#, RetryIn::Default),
            Fate::Exhausted { morgue: false }
        );
        assert_eq!(fate(r#"{"retry":false}"#, RetryIn::Default), Fate::NoRetry);
        assert_eq!(
            fate(r#"{"retry":3}"#, RetryIn::Kill),
            Fate::Exhausted { morgue: true }
        );
        assert_eq!(fate(r#"{"retry":3}"#, RetryIn::Discard), Fate::Discarded);
        match fate(r#"{"retry":3}"#, RetryIn::Seconds(1000)) {
            Fate::Retry { at } => assert!((1000.0..1010.0).contains(&at)),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_job_without_retry_takes_the_worker_option() {
        let with = |option: Option<WorkerRetry>, raw: &str| {
            let mut f = failure(RetryIn::Default);
            f.worker_retry = option;
            plan(job(raw), "q", &f, 0.0)
        };
        let p = with(Some(WorkerRetry::Times(0)), r#"{"class":"W"}"#);
        assert_eq!(p.fate, Fate::Exhausted { morgue: true });
        assert_eq!(p.job.get("retry"), Some(&Value::from(0)));
        let p = with(Some(WorkerRetry::Flag(false)), r#"{"retry":null}"#);
        assert_eq!(p.fate, Fate::NoRetry);
        assert_eq!(p.job.get("retry"), Some(&Value::Bool(false)));
        // A job's own field wins; with no option, Sidekiq's default applies.
        let p = with(Some(WorkerRetry::Times(0)), r#"{"retry":3}"#);
        assert!(matches!(p.fate, Fate::Retry { .. }));
        let p = with(None, r#"{"class":"W"}"#);
        assert!(matches!(p.fate, Fate::Retry { .. }));
        assert!(p.job.get("retry").is_none());
    }

    #[test]
    fn backtrace_option_limits_lines() {
        let p = plan(
            job(r#"{"backtrace":1}"#),
            "q",
            &failure(RetryIn::Default),
            0.0,
        );
        let b64 = p.job.str("error_backtrace").unwrap().replace('\n', "");
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(b64)
            .unwrap();
        let mut json = String::new();
        use std::io::Read;
        flate2::read::ZlibDecoder::new(&bytes[..])
            .read_to_string(&mut json)
            .unwrap();
        assert_eq!(json, r#"["a.rb:1"]"#);
    }

    #[test]
    fn long_messages_are_truncated_by_characters() {
        let mut f = failure(RetryIn::Default);
        f.error_message = "é".repeat(MAX_ERROR_MESSAGE + 5);
        let p = plan(job("{}"), "q", &f, 0.0);
        assert_eq!(
            p.job.str("error_message").unwrap().chars().count(),
            MAX_ERROR_MESSAGE
        );
    }
}
