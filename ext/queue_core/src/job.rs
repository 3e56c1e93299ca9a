//! A Sidekiq job hash, kept verbatim.
//!
//! Apps and middleware add their own fields to jobs, and Sidekiq peers must read back exactly what they
//! wrote, so a `Job` keeps every field it does not understand, in its original order, and every number
//! in its original digits (`serde_json` with `preserve_order` and `arbitrary_precision`: a 30-digit
//! integer or a float such as `0.1` survives a read and a write byte for byte).

use serde_json::{Map, Number, Value};

use crate::error::{Error, Result};

/// Sidekiq's default number of retries when a job says `"retry": true`.
pub const DEFAULT_MAX_RETRIES: i64 = 25;

/// An integer timestamp below this is seconds (read as milliseconds it would fall in 1973): no
/// Sidekiq writes one, but a hand-rolled client may write `Time.now.to_i`.
const MILLIS_FROM: f64 = 1e11;

/// How a job writes its timestamps (`created_at`, `enqueued_at`, `failed_at`, `retried_at`):
/// Sidekiq 6.4–7.x write float epoch seconds, Sidekiq 8 integer epoch milliseconds. Jobs keep the
/// form they came in with, so the Sidekiq that wrote a job reads back what it wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeForm {
    /// Float epoch seconds, always with a fractional part (`1700000000.25`).
    Seconds,
    /// Integer epoch milliseconds (`1700000000250`).
    Millis,
}

/// Seconds since the epoch of a job timestamp in either form, Sidekiq 8's rule: a float is seconds,
/// an integer milliseconds (unless below [`MILLIS_FROM`]). `None` for anything but a number.
pub fn epoch_seconds(value: &Value) -> Option<f64> {
    let Value::Number(n) = value else {
        return None;
    };
    let x = n.as_f64()?;
    Some(if form_of(n, x) == TimeForm::Millis {
        x / 1000.0
    } else {
        x
    })
}

fn form_of(n: &Number, x: f64) -> TimeForm {
    // With `arbitrary_precision` a number keeps its digits: `1.0` is not an integer, `1000` is.
    if (n.is_i64() || n.is_u64()) && x >= MILLIS_FROM {
        TimeForm::Millis
    } else {
        TimeForm::Seconds
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Job {
    fields: Map<String, Value>,
}

/// What a job's `retry` field allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RetryPolicy {
    /// `retry: false`: a failure is final and the job is not kept.
    Disabled,
    /// Retry until `retry_count` reaches this many (`retry: true` means 25, `retry: 0` means none).
    UpTo(i64),
}

impl Job {
    /// Parses job JSON read from Redis. Anything but a JSON object is an [`Error::InvalidJob`].
    pub fn parse(raw: impl AsRef<[u8]>) -> Result<Job> {
        match serde_json::from_slice::<Value>(raw.as_ref()) {
            Ok(Value::Object(fields)) => Ok(Job { fields }),
            Ok(other) => Err(Error::InvalidJob(format!(
                "job must be a JSON object, found {}",
                kind_of(&other)
            ))),
            Err(e) => Err(Error::InvalidJob(format!("job is not valid JSON: {e}"))),
        }
    }

    pub fn to_json(&self) -> String {
        // Serializing a map of JSON values cannot fail.
        serde_json::to_string(&self.fields).unwrap_or_else(|_| "{}".to_owned())
    }

    pub fn get(&self, field: &str) -> Option<&Value> {
        self.fields.get(field)
    }

    pub fn str(&self, field: &str) -> Option<&str> {
        self.fields.get(field).and_then(Value::as_str)
    }

    pub fn queue(&self) -> Option<&str> {
        self.str("queue")
    }

    pub fn jid(&self) -> Option<&str> {
        self.str("jid")
    }

    pub fn class(&self) -> Option<&str> {
        self.str("class")
    }

    pub fn set(&mut self, field: &str, value: Value) {
        self.fields.insert(field.to_owned(), value);
    }

    pub fn set_float(&mut self, field: &str, x: f64) {
        let value = Number::from_f64(x)
            .map(Value::Number)
            .unwrap_or(Value::Null);
        self.set(field, value);
    }

    /// A timestamp field in seconds since the epoch, whichever form it is written in.
    pub fn time(&self, field: &str) -> Option<f64> {
        self.get(field).and_then(epoch_seconds)
    }

    /// The form of the job's timestamps: that of `created_at`, else `enqueued_at`, else `failed_at`;
    /// float seconds for a job with none of them.
    pub fn time_form(&self) -> TimeForm {
        ["created_at", "enqueued_at", "failed_at"]
            .iter()
            .find_map(|field| match self.get(field) {
                Some(Value::Number(n)) => n.as_f64().map(|x| form_of(n, x)),
                _ => None,
            })
            .unwrap_or(TimeForm::Seconds)
    }

    /// Writes `secs` (epoch seconds) into a timestamp field in `form`.
    pub fn set_time(&mut self, field: &str, secs: f64, form: TimeForm) {
        match form {
            TimeForm::Seconds => self.set_float(field, secs),
            // Whole milliseconds, truncated as Sidekiq 8's `clock_gettime(…, :millisecond)`; they
            // fit an i64 for the next 292 million years.
            TimeForm::Millis => self.set(field, Value::from((secs * 1000.0).floor() as i64)),
        }
    }

    /// Writes `secs` into a timestamp field in the form the job's other timestamps have.
    pub fn stamp(&mut self, field: &str, secs: f64) {
        let form = self.time_form();
        self.set_time(field, secs, form);
    }

    pub fn remove(&mut self, field: &str) -> Option<Value> {
        self.fields.shift_remove(field)
    }

    /// The job's `retry` field as a policy. A missing or `null` field means Sidekiq's default.
    pub fn retry_policy(&self) -> RetryPolicy {
        match self.fields.get("retry") {
            Some(Value::Bool(false)) => RetryPolicy::Disabled,
            Some(Value::Number(n)) => RetryPolicy::UpTo(n.as_i64().unwrap_or(DEFAULT_MAX_RETRIES)),
            _ => RetryPolicy::UpTo(DEFAULT_MAX_RETRIES),
        }
    }

    /// `retry_count` after the previous failure, or `None` if the job never failed.
    pub fn retry_count(&self) -> Option<i64> {
        self.fields.get("retry_count").and_then(Value::as_i64)
    }
}

fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_keeps_unknown_fields_order_and_digits() {
        let raw = r#"{"class":"W","args":[123456789012345678901234567890,0.1,1e-7,"ünï"],"zz":{"b":1,"a":2},"queue":"q","jid":"abc","created_at":1700000000.123456}"#;
        let job = Job::parse(raw).unwrap();
        assert_eq!(job.to_json(), raw);
    }

    #[test]
    fn set_float_keeps_a_fraction() {
        let mut job = Job::parse(r#"{"class":"W"}"#).unwrap();
        job.set_float("enqueued_at", 1700000000.0);
        assert_eq!(job.to_json(), r#"{"class":"W","enqueued_at":1700000000.0}"#);
    }

    fn secs(raw: &str) -> Option<f64> {
        epoch_seconds(&serde_json::from_str::<Value>(raw).unwrap())
    }

    #[test]
    fn timestamps_read_as_seconds_in_either_form() {
        // Sidekiq 8 writes integer milliseconds, 6.4–7.x float seconds.
        assert_eq!(secs("1763985600123"), Some(1763985600.123));
        assert_eq!(secs("1763985600.123"), Some(1763985600.123));
        assert_eq!(secs("1763985600.0"), Some(1763985600.0));
        // A float is seconds whatever its size, as Ruby's Float is to Sidekiq 8.
        assert_eq!(secs("1.763985600123e12"), Some(1763985600123.0));
        // An integer too small to be milliseconds of this era is seconds (`Time.now.to_i`).
        assert_eq!(secs("1763985600"), Some(1763985600.0));
        assert_eq!(secs("\"1763985600\""), None);
        assert_eq!(secs("null"), None);
    }

    #[test]
    fn time_form_follows_created_at_then_enqueued_at_then_failed_at() {
        let form = |raw: &str| Job::parse(raw).unwrap().time_form();
        assert_eq!(form(r#"{"created_at":1763985600123}"#), TimeForm::Millis);
        assert_eq!(
            form(r#"{"created_at":1763985600.5,"enqueued_at":1763985600123}"#),
            TimeForm::Seconds
        );
        assert_eq!(form(r#"{"enqueued_at":1763985600123}"#), TimeForm::Millis);
        assert_eq!(form(r#"{"failed_at":1763985600123}"#), TimeForm::Millis);
        assert_eq!(
            form(r#"{"created_at":"x","failed_at":1763985600123}"#),
            TimeForm::Millis
        );
        assert_eq!(form(r#"{"class":"W"}"#), TimeForm::Seconds);
    }

    #[test]
    fn stamp_writes_the_jobs_own_form() {
        let mut job = Job::parse(r#"{"created_at":1763985600123}"#).unwrap();
        job.stamp("enqueued_at", 1763985601.2345);
        assert_eq!(
            job.to_json(),
            r#"{"created_at":1763985600123,"enqueued_at":1763985601234}"#
        );
        let mut job = Job::parse(r#"{"created_at":1763985600.5}"#).unwrap();
        job.stamp("enqueued_at", 1763985601.0);
        assert_eq!(
            job.to_json(),
            r#"{"created_at":1763985600.5,"enqueued_at":1763985601.0}"#
        );
        assert_eq!(job.time("created_at"), Some(1763985600.5));
    }

    #[test]
    fn rejects_non_objects() {
        assert!(matches!(Job::parse("[1]"), Err(Error::InvalidJob(_))));
        assert!(matches!(Job::parse("{nope"), Err(Error::InvalidJob(_))));
    }

    #[test]
    fn retry_policy_follows_sidekiq() {
        let p = |s: &str| Job::parse(s).unwrap().retry_policy();
        assert_eq!(p(r#"{"retry":true}"#), RetryPolicy::UpTo(25));
        assert_eq!(p(r#"{}"#), RetryPolicy::UpTo(25));
        assert_eq!(p(r#"{"retry":false}"#), RetryPolicy::Disabled);
        assert_eq!(p(r#"{"retry":3}"#), RetryPolicy::UpTo(3));
        assert_eq!(p(r#"{"retry":0}"#), RetryPolicy::UpTo(0));
    }
}
